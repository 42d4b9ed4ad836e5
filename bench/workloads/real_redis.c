/* Workload `redis`: redis-server under the preloaded allocator, driven by
 * redis-benchmark (run on the system allocator, so only the server is being
 * compared) over a private unix socket in a fresh temporary directory — no
 * TCP port, nothing persisted. The request count is bounded (--scale).
 * The driver reports the benchmark's duration as work_s, the requests per
 * second of each test, and the *server's* CPU time and peak RSS as
 * override_cpu_s= / override_peak_rss_kib= (the runner would otherwise see
 * the maximum over driver, server and client). The server is always
 * stopped, even when the benchmark fails. */
#include "wl_common.h"
#include "wl_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

static char dir[PATH_MAX] = "";
static char sock[PATH_MAX + 16];
static volatile pid_t server = -1;

/* Stops the server; returns 1 when it had already died abnormally or did not
 * exit cleanly on SIGTERM. */
static int stop_server(struct rusage *ru) {
  int bad = 0;
  memset(ru, 0, sizeof *ru);
  if (server > 0) {
    int status = 0;
    kill(server, SIGTERM);
    if (wait4(server, &status, 0, ru) < 0) bad = 1;
    else if (WIFSIGNALED(status) && WTERMSIG(status) != SIGTERM) bad = 1;
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) bad = 1;
    server = -1;
  }
  char path[PATH_MAX + 16];
  unlink(sock);
  snprintf(path, sizeof path, "%s/dump.rdb", dir);
  unlink(path);
  if (dir[0]) rmdir(dir);
  return bad;
}

static int accepts_connections(void) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  size_t len = strlen(sock);
  if (len >= sizeof addr.sun_path) {
    close(fd);
    return 0;
  }
  memcpy(addr.sun_path, sock, len + 1);
  int ok = connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0;
  close(fd);
  return ok;
}

static volatile pid_t client = -1;

/* SIGTERM/SIGINT (the runner's timeout or Ctrl-C): stop both processes and
 * remove the socket directory, using only async-signal-safe calls. */
static void on_terminate(int sig) {
  (void)sig;
  if (server > 0) kill(server, SIGKILL);
  if (client > 0) kill(client, SIGKILL);
  unlink(sock);
  static char dump[PATH_MAX + 16];
  size_t n = strlen(dir);
  if (n > 0 && n + sizeof "/dump.rdb" < sizeof dump) {
    memcpy(dump, dir, n);
    memcpy(dump + n, "/dump.rdb", sizeof "/dump.rdb");
    unlink(dump);
    rmdir(dir);
  }
  _exit(143);
}

static void fail(const char *what) {
  struct rusage ru;
  stop_server(&ru);
  wl_fail(what);
}

int main(int argc, char **argv) {
  wl_options_t o = wl_parse(argc, argv, "redis: redis-server on a unix socket, driven by redis-benchmark (bounded request count)");
  char server_path[PATH_MAX], bench_path[PATH_MAX];
  if (!wl_find_program("redis-server", server_path)) wl_unavailable("redis-server", "apt-get install redis-server");
  if (!wl_find_program("redis-benchmark", bench_path)) wl_unavailable("redis-benchmark", "apt-get install redis-tools");

  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(dir, sizeof dir, "%s/tessera-redis-XXXXXX", tmp);
  if (!mkdtemp(dir)) wl_fail("mkdtemp failed");
  snprintf(sock, sizeof sock, "%s/redis.sock", dir);
  if (strlen(sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) fail("TMPDIR is too long for a unix socket path");

  signal(SIGTERM, on_terminate);
  signal(SIGINT, on_terminate);
  fflush(stdout);
  server = fork();
  if (server < 0) fail("fork failed");
  if (server == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) { dup2(devnull, 1); close(devnull); }
    execl(server_path, "redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
          "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning", "--dir", dir,
          (char *)NULL);
    _exit(127);
  }
  /* Wait until the server accepts connections (at most 10 s): the socket
   * file appears at bind(), a moment before listen(). */
  for (int i = 0; !accepts_connections(); i++) {
    int status;
    if (waitpid(server, &status, WNOHANG) == server) { server = -1; fail("redis-server exited at start"); }
    if (i > 1000) fail("redis-server did not accept connections within 10 s");
    usleep(10000);
  }

  long requests = wl_scaled(&o, 10000L, 1000);
  char n_arg[32];
  snprintf(n_arg, sizeof n_arg, "%ld", requests);
  int out[2];
  if (pipe(out)) fail("pipe failed");
  double t0 = wl_now();
  client = fork();
  if (client < 0) fail("fork failed");
  if (client == 0) {
    unsetenv("LD_PRELOAD"); /* the client is not what is being compared */
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    execl(bench_path, "redis-benchmark", "-s", sock, "-n", n_arg, "-c", "16", "-P", "16", "-r", "100000",
          "-d", "96", "--csv", "-t", "set,get,incr,lpush,lpop,sadd,hset,zadd,lrange_100,mset", (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  FILE *results = fdopen(out[0], "r");
  char line[512];
  int tests = 0;
  while (results && fgets(line, sizeof line, results)) {
    /* "test","rps",... ; the header line has a non-numeric rps. */
    char name[128];
    double rps;
    if (sscanf(line, "\"%127[^\"]\",\"%lf\"", name, &rps) == 2) {
      for (char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'))) *c = '_';
      printf("rps_%s=%.0f\n", name, rps);
      tests++;
    }
  }
  if (results) fclose(results);
  int status;
  waitpid(client, &status, 0);
  double work = wl_now() - t0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail("redis-benchmark failed");
  if (tests == 0) fail("redis-benchmark printed no results");

  struct rusage ru;
  if (stop_server(&ru)) wl_fail("redis-server did not stop cleanly");
  printf("override_cpu_s=%.6f\n", (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                                       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6);
  printf("override_peak_rss_kib=%ld\n", ru.ru_maxrss);
  wl_report(work, (double)requests * tests);
  return 0;
}
