/* Process runner for the comparison suite (see bench_proc.h).
 * The loop waits on the child's pidfd and both output pipes with poll(),
 * waking every sample interval to read VmRSS; without pidfd support it falls
 * back to polling waitpid every millisecond. Output beyond 1 MiB per stream
 * is read and dropped so a chatty program cannot block on a full pipe. */
#define _GNU_SOURCE
#include "bench_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CAPTURE_LIMIT (1 << 20)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *bench_signal_name(int sig) {
  static char buf[32];
  const char *abbrev = sigabbrev_np(sig);
  if (abbrev) snprintf(buf, sizeof buf, "SIG%s", abbrev);
  else snprintf(buf, sizeof buf, "SIG%d", sig);
  return buf;
}

typedef struct capture_s {
  int fd;
  char *buf;
  size_t len, cap;
} capture_t;

/* Reads what is available; returns 0 at EOF, 1 otherwise. */
static int capture_read(capture_t *c) {
  char chunk[8192];
  ssize_t n = read(c->fd, chunk, sizeof chunk);
  if (n < 0) return errno == EINTR || errno == EAGAIN ? 1 : 0;
  if (n == 0) return 0;
  if (c->len + (size_t)n + 1 > c->cap && c->len < CAPTURE_LIMIT) {
    size_t cap = c->cap ? c->cap : 4096;
    while (cap < c->len + (size_t)n + 1) cap *= 2;
    char *grown = realloc(c->buf, cap);
    if (grown) {
      c->buf = grown;
      c->cap = cap;
    }
  }
  if (c->len + (size_t)n + 1 <= c->cap) {
    memcpy(c->buf + c->len, chunk, (size_t)n);
    c->len += (size_t)n;
    c->buf[c->len] = '\0';
  }
  return 1;
}

static char *capture_take(capture_t *c) {
  if (!c->buf) return strdup("");
  return c->buf;
}

static long read_vmrss_kib(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6)) {
      kib = strtol(line + 6, NULL, 10);
      break;
    }
  fclose(f);
  return kib;
}

static void add_sample(bench_outcome_t *o, size_t *cap, double t, long kib) {
  if (o->n_samples == *cap) {
    size_t grown = *cap ? *cap * 2 : 256;
    double *t2 = realloc(o->sample_t, grown * sizeof *t2);
    if (!t2) return;
    o->sample_t = t2;
    long *k2 = realloc(o->sample_kib, grown * sizeof *k2);
    if (!k2) return;
    o->sample_kib = k2;
    *cap = grown;
  }
  o->sample_t[o->n_samples] = t;
  o->sample_kib[o->n_samples] = kib;
  o->n_samples++;
}

/* Opens the counter on pid, armed to start at its exec; -1 when the kernel
 * (or the hypervisor) does not offer it. */
static int open_counter(pid_t pid, bench_counter_t counter) {
  if (counter == BENCH_COUNT_NONE) return -1;
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  if (counter == BENCH_COUNT_INSTRUCTIONS) {
    attr.type = PERF_TYPE_HARDWARE;
    attr.config = PERF_COUNT_HW_INSTRUCTIONS;
  } else {
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
  }
  attr.disabled = 1;
  attr.enable_on_exec = 1;
  attr.inherit = 1;        /* threads and children count too */
  attr.exclude_kernel = 1; /* the allocator's work, not the kernel's */
  attr.exclude_hv = 1;
  return (int)syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* Process group of the run in progress (0: none), for bench_kill_current. */
static volatile sig_atomic_t current_group;

void bench_kill_current(void) {
  pid_t group = (pid_t)current_group;
  if (group <= 0) return;
  /* SIGTERM first so a driver can stop its server and remove its files,
   * then SIGKILL whatever is left a moment later. */
  killpg(group, SIGTERM);
  struct timespec pause = {0, 200 * 1000 * 1000};
  nanosleep(&pause, NULL);
  killpg(group, SIGKILL);
}

void bench_outcome_free(bench_outcome_t *o) {
  free(o->out);
  free(o->err);
  free(o->sample_t);
  free(o->sample_kib);
  memset(o, 0, sizeof *o);
}

static void fail_start(bench_outcome_t *o, const char *what) {
  snprintf(o->status, sizeof o->status, "error");
  free(o->err);
  o->err = strdup(what);
  if (!o->out) o->out = strdup("");
}

int bench_spawn(const bench_spawn_t *spec, bench_outcome_t *o) {
  memset(o, 0, sizeof *o);
  o->maxrss_kib = -1;
  o->counter = -1;
  if (spec->preload && strpbrk(spec->preload, " :")) {
    /* ld.so would split it, skip the pieces and run the workload on glibc
     * under the other allocator's name. (tessera bench refuses such an
     * --allocator before running; this keeps any other caller honest.) */
    fail_start(o, "cannot preload a library whose path contains a space or a colon "
               "(the dynamic loader splits LD_PRELOAD there)");
    return -1;
  }
  int out_pipe[2], err_pipe[2], go_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC)) { fail_start(o, strerror(errno)); return -1; }
  if (pipe2(err_pipe, O_CLOEXEC)) {
    close(out_pipe[0]); close(out_pipe[1]);
    fail_start(o, strerror(errno));
    return -1;
  }
  /* The child waits for a byte on go_pipe so the clock starts just before exec. */
  if (pipe2(go_pipe, O_CLOEXEC)) {
    close(out_pipe[0]); close(out_pipe[1]); close(err_pipe[0]); close(err_pipe[1]);
    fail_start(o, strerror(errno));
    return -1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(out_pipe[0]); close(out_pipe[1]); close(err_pipe[0]); close(err_pipe[1]);
    close(go_pipe[0]); close(go_pipe[1]);
    fail_start(o, strerror(e));
    return -1;
  }
  if (pid == 0) {
    setpgid(0, 0); /* its own group: the timeout kills servers it started too */
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    char go;
    close(go_pipe[1]);
    if (read(go_pipe[0], &go, 1) != 1) _exit(126);
    if (spec->preload) setenv("LD_PRELOAD", spec->preload, 1);
    else unsetenv("LD_PRELOAD");
    execv(spec->argv[0], spec->argv);
    fprintf(stderr, "cannot run %s: %s\n", spec->argv[0], strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid); /* also from the parent, so killpg works whoever runs first */
  current_group = pid;
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(go_pipe[0]);
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  int counter_fd = open_counter(pid, spec->counter);

  capture_t cap_out = {out_pipe[0], NULL, 0, 0}, cap_err = {err_pipe[0], NULL, 0, 0};
  size_t sample_cap = 0;
  double start = now_s();
  if (write(go_pipe[1], "g", 1) != 1) { /* child died before exec: reaped below */ }
  close(go_pipe[1]);

  int out_open = 1, err_open = 1, exited = 0, timed_out = 0, killed = 0, status = 0;
  double kill_at = 0;
  double end = 0, next_sample = start;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  while (!exited || out_open || err_open) {
    double t = now_s();
    if (!exited && spec->sample_every_s > 0 && t >= next_sample) {
      long kib = read_vmrss_kib(pid);
      if (kib >= 0) add_sample(o, &sample_cap, t - start, kib);
      next_sample = t + spec->sample_every_s;
    }
    if (!exited && !timed_out && t - start > spec->timeout_s) {
      /* SIGTERM lets a driver clean up (redis: its socket directory);
       * SIGKILL follows after a grace second. */
      killpg(pid, SIGTERM);
      kill(pid, SIGTERM);
      timed_out = 1;
      kill_at = t + 1.0;
    }
    if (!exited && timed_out && !killed && t >= kill_at) {
      killpg(pid, SIGKILL);
      kill(pid, SIGKILL);
      killed = 1;
    }
    struct pollfd pfd[3];
    int n = 0, idx_out = -1, idx_err = -1, idx_pid = -1;
    if (out_open) { pfd[n].fd = cap_out.fd; pfd[n].events = POLLIN; idx_out = n++; }
    if (err_open) { pfd[n].fd = cap_err.fd; pfd[n].events = POLLIN; idx_err = n++; }
    if (!exited && pidfd >= 0) { pfd[n].fd = pidfd; pfd[n].events = POLLIN; idx_pid = n++; }
    int wait_ms = 1;
    if (pidfd >= 0 || exited) {
      double until = timed_out ? kill_at : start + spec->timeout_s;
      if (spec->sample_every_s > 0 && next_sample < until) until = next_sample;
      wait_ms = (int)((until - t) * 1000.0) + 1;
      if (wait_ms < 1) wait_ms = 1;
      if (exited) wait_ms = 1000; /* only the pipes are left: a grandchild may hold them */
    }
    int ready = n ? poll(pfd, (nfds_t)n, wait_ms) : 0;
    if (ready < 0 && errno != EINTR) break;
    if (idx_out >= 0 && ready > 0 && pfd[idx_out].revents) out_open = capture_read(&cap_out);
    if (idx_err >= 0 && ready > 0 && pfd[idx_err].revents) err_open = capture_read(&cap_err);
    if (!exited && (pidfd < 0 || (idx_pid >= 0 && ready > 0 && pfd[idx_pid].revents))) {
      pid_t r = wait4(pid, &status, WNOHANG, &ru);
      if (r == pid) {
        end = now_s();
        exited = 1;
        /* Anything the workload left behind in its group goes now; its pipes
         * then reach EOF. */
        killpg(pid, SIGKILL);
      }
    }
    if (exited && ready == 0 && (out_open || err_open)) {
      /* A descendant outside the group still holds a pipe: stop waiting. */
      break;
    }
  }
  current_group = 0;
  if (pidfd >= 0) close(pidfd);
  o->counter = -1;
  if (counter_fd >= 0) {
    /* Inherited counts are folded in as each thread and child exits; all
     * have been reaped, so this is the final value. */
    long long value;
    if (read(counter_fd, &value, sizeof value) == (ssize_t)sizeof value) o->counter = value;
    close(counter_fd);
  }
  close(cap_out.fd);
  close(cap_err.fd);
  o->out = capture_take(&cap_out);
  o->err = capture_take(&cap_err);
  o->wall_s = end - start;
  o->user_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
  o->sys_s = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
  o->maxrss_kib = ru.ru_maxrss;
  if (timed_out) snprintf(o->status, sizeof o->status, "timeout");
  else if (WIFSIGNALED(status)) snprintf(o->status, sizeof o->status, "signal:%s", bench_signal_name(WTERMSIG(status)));
  else if (WEXITSTATUS(status) == 0) snprintf(o->status, sizeof o->status, "ok");
  else if (WEXITSTATUS(status) == BENCH_EXIT_UNAVAILABLE) snprintf(o->status, sizeof o->status, "skipped");
  else snprintf(o->status, sizeof o->status, "exit:%d", WEXITSTATUS(status));
  return 0;
}
