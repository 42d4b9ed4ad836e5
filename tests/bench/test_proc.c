/* Tests of the process runner (bench_proc.c) with /bin/sh as the workload:
 * exit codes, death by signal (named), the "not installed" exit code 77,
 * the timeout killing the whole process group, stdout/stderr capture,
 * LD_PRELOAD set or cleared (a path ld.so would split refused), and RSS
 * sampling. */
#include "bench_proc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static void run_sh(const char *script, const char *preload, double timeout, double sample, bench_outcome_t *o) {
  char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
  bench_spawn_t spec = {argv, preload, timeout, sample, BENCH_COUNT_NONE};
  CHECK(bench_spawn(&spec, o) == 0);
}

/* bench_spawn's own return value (run_sh expects 0). */
static int run_sh_rc(const char *script, const char *preload, bench_outcome_t *o) {
  char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
  bench_spawn_t spec = {argv, preload, 10, 0, BENCH_COUNT_NONE};
  return bench_spawn(&spec, o);
}

int main(void) {
  bench_outcome_t o;

  run_sh("echo work_s=0.25; echo oops >&2; exit 0", NULL, 10, 0, &o);
  CHECK(!strcmp(o.status, "ok"));
  CHECK(!strcmp(o.out, "work_s=0.25\n"));
  CHECK(!strcmp(o.err, "oops\n"));
  CHECK(o.wall_s > 0 && o.wall_s < 5);
  CHECK(o.maxrss_kib > 0);
  bench_outcome_free(&o);

  run_sh("exit 3", NULL, 10, 0, &o);
  CHECK(!strcmp(o.status, "exit:3"));
  bench_outcome_free(&o);

  run_sh("echo 'redis-server not installed' >&2; exit 77", NULL, 10, 0, &o);
  CHECK(!strcmp(o.status, "skipped"));
  CHECK(strstr(o.err, "not installed") != NULL);
  bench_outcome_free(&o);

  run_sh("kill -SEGV $$", NULL, 10, 0, &o);
  CHECK(!strcmp(o.status, "signal:SIGSEGV"));
  bench_outcome_free(&o);

  run_sh("kill -ABRT $$", NULL, 10, 0, &o);
  CHECK(!strcmp(o.status, "signal:SIGABRT"));
  bench_outcome_free(&o);

  /* The timeout kills the shell and the sleep it started (same group):
   * bench_spawn must return promptly, not after the 30 s sleep. */
  run_sh("sleep 30 & sleep 30; echo never", NULL, 0.3, 0, &o);
  CHECK(!strcmp(o.status, "timeout"));
  CHECK(o.wall_s < 5);
  CHECK(strstr(o.out, "never") == NULL);
  bench_outcome_free(&o);

  /* A program that ignores SIGTERM is still ended (SIGKILL after grace).
   * The shell inherits the ignored disposition through fork and exec: a
   * `trap '' TERM` in the script alone would race with the timeout on a
   * loaded machine (a shell not yet at its trap after 0.3 s dies of the
   * TERM, and the run ends before the grace second). */
  {
    struct sigaction ignore = {.sa_handler = SIG_IGN}, saved;
    sigemptyset(&ignore.sa_mask);
    CHECK(sigaction(SIGTERM, &ignore, &saved) == 0);
    run_sh("trap '' TERM; sleep 30 & sleep 30", NULL, 0.3, 0, &o);
    CHECK(sigaction(SIGTERM, &saved, NULL) == 0);
    CHECK(!strcmp(o.status, "timeout"));
    CHECK(o.wall_s > 1.0 && o.wall_s < 5);
    bench_outcome_free(&o);
  }

  /* LD_PRELOAD is set for the child only, and cleared for the system run.
   * An empty-named preload would make the loader complain; use a real
   * library that is always there. */
  setenv("LD_PRELOAD", "", 1);
  run_sh("echo \"preload=[$LD_PRELOAD]\"", "libc.so.6", 10, 0, &o);
  CHECK(strstr(o.out, "preload=[libc.so.6]") != NULL);
  bench_outcome_free(&o);
  run_sh("echo \"preload=[${LD_PRELOAD-unset}]\"", NULL, 10, 0, &o);
  CHECK(strstr(o.out, "preload=[unset]") != NULL);
  bench_outcome_free(&o);

  /* A preload the loader would split is refused before anything runs. */
  CHECK(run_sh_rc("echo ran", "/tmp/a dir/libx.so", &o) == -1);
  CHECK(!strcmp(o.status, "error") && strstr(o.err, "space or a colon") && !strstr(o.out, "ran"));
  bench_outcome_free(&o);
  CHECK(run_sh_rc("echo ran", "/tmp/a:b/libx.so", &o) == -1);
  CHECK(!strcmp(o.status, "error") && !strstr(o.out, "ran"));
  bench_outcome_free(&o);

  /* RSS sampling every 10 ms over a 0.3 s run gives a series. */
  run_sh("sleep 0.3", NULL, 10, 0.01, &o);
  CHECK(!strcmp(o.status, "ok"));
  CHECK(o.n_samples >= 5);
  if (o.n_samples >= 2) CHECK(o.sample_t[o.n_samples - 1] > o.sample_t[0] && o.sample_kib[0] > 0);
  bench_outcome_free(&o);

  /* The perf counter covers the process tree from exec: a shell whose
   * child spins for a while shows that much task-clock. */
  {
    /* The loop runs in a grandchild: only an inherited counter sees it. */
    char *argv2[] = {"/bin/sh", "-c", "/bin/sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done'; true", NULL};
    bench_spawn_t clock_spec = {argv2, NULL, 30, 0, BENCH_COUNT_TASK_CLOCK};
    CHECK(bench_spawn(&clock_spec, &o) == 0);
    CHECK(!strcmp(o.status, "ok"));
    double cpu = o.user_s + o.sys_s;
    if (o.counter < 0) {
      printf("note: perf events unavailable here (task-clock); counter mechanism not checked\n");
    } else {
      /* user-space task clock: at most the CPU time, and a good part of it */
      CHECK(o.counter > 0);
      CHECK((double)o.counter * 1e-9 <= cpu + 0.05);
      CHECK((double)o.counter * 1e-9 >= 0.3 * o.user_s);
    }
    bench_outcome_free(&o);
    bench_spawn_t instr_spec = {argv2, NULL, 30, 0, BENCH_COUNT_INSTRUCTIONS};
    CHECK(bench_spawn(&instr_spec, &o) == 0);
    CHECK(o.counter == -1 || o.counter > 1000000);
    if (o.counter == -1) printf("note: hardware instruction counter unavailable (expected in many VMs)\n");
    bench_outcome_free(&o);
  }

  /* A program that cannot be executed: exit 127 from the child. */
  char *argv[] = {"/nonexistent/workload", NULL};
  bench_spawn_t spec = {argv, NULL, 10, 0, BENCH_COUNT_NONE};
  CHECK(bench_spawn(&spec, &o) == 0);
  CHECK(!strcmp(o.status, "exit:127"));
  CHECK(strstr(o.err, "cannot run /nonexistent/workload") != NULL);
  bench_outcome_free(&o);

  CHECK(!strcmp(bench_signal_name(SIGKILL), "SIGKILL"));

  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("bench proc: all checks passed\n");
  return 0;
}
