/* api_small_stack.c — the introspection calls and the exit reports fit a
 * thread with the smallest stack POSIX allows (PTHREAD_STACK_MIN, 16 KiB).
 *
 * Each case runs in a child process, on a thread with a 16 KiB stack,
 * below a frame that already holds a local buffer (a caller's own stack
 * use). They kept 3.3 KB statistics structs on the stack: malloc_trim took
 * 8.8 KB (two of them), mallinfo2 5.5 KB, and the exit hooks behind
 * TESSERA_SHOW_STATS and TESSERA_HEAP_REPORT (`tessera run --stats`,
 * `--heap-report`) crashed any program whose small-stack thread called
 * exit(). glibc's versions fit in each case. Linked with libtessera.a, as
 * every lib.api_* test. */
#define _GNU_SOURCE
#include "tessera.h"

#include "api_check.h"

#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/wait.h>

typedef struct {
  const char *name;
  size_t caller_bytes; /* the caller's own buffer, below which the call runs */
  int op;
} stack_case_t;

enum { OP_TRIM, OP_MALLINFO2, OP_STATS, OP_INFO, OP_TES_PRINT, OP_HEAP_REPORT, OP_EXIT_STATS, OP_EXIT_REPORT };

static const stack_case_t *current;
static FILE *sink;

static __attribute__((noinline)) void call_with_buffer(void) {
  char *buffer = __builtin_alloca(current->caller_bytes + 1);
  memset(buffer, 'x', current->caller_bytes + 1);
  __asm__ volatile("" ::"r"(buffer) : "memory");
  switch (current->op) {
  case OP_TRIM: malloc_trim(0); break;
  case OP_MALLINFO2: (void)mallinfo2(); break;
  case OP_STATS: malloc_stats(); break;
  case OP_INFO: malloc_info(0, sink); break;
  case OP_TES_PRINT: tes_stats_print(sink); break;
  case OP_HEAP_REPORT: tes_heap_report(sink); break;
  case OP_EXIT_STATS: tes_option_set(TES_OPTION_SHOW_STATS, 1); exit(0);
  case OP_EXIT_REPORT: setenv("TESSERA_HEAP_REPORT", "1", 1); exit(0);
  }
  __asm__ volatile("" ::"r"(buffer) : "memory");
}

static void *small_thread(void *unused) {
  (void)unused;
  for (int i = 0; i < 200; i++) (void)malloc((size_t)i * 40 + 1); /* a heap with something in it */
  call_with_buffer();
  return NULL;
}

static void run_case(const stack_case_t *c) {
  fflush(NULL);
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    current = c;
    /* stderr stays unbuffered (only its descriptor moves): glibc prints to
     * an unbuffered stream through an 8 KiB buffer on the stack, which
     * counts against the same 16 KiB. */
    sink = fopen("/dev/null", "w");
    if (sink == NULL || dup2(fileno(sink), 2) < 0) _exit(3);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN);
    pthread_t t;
    if (pthread_create(&t, &attr, small_thread, NULL) != 0) _exit(4);
    pthread_join(t, NULL);
    _exit(0);
  }
  int status;
  REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s on a %d-byte stack below a %zu-byte buffer: %s %d",
        c->name, (int)PTHREAD_STACK_MIN, c->caller_bytes, WIFSIGNALED(status) ? "signal" : "exit",
        WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  REQUIRE(api_malloc_is_linked_tessera(), "api_small_stack must be linked with libtessera");
  static const stack_case_t cases[] = {
      {"malloc_trim", 4096, OP_TRIM},          {"mallinfo2", 4096, OP_MALLINFO2},
      {"malloc_stats", 512, OP_STATS},         {"malloc_info", 512, OP_INFO},
      {"tes_stats_print", 512, OP_TES_PRINT},  {"tes_heap_report", 2048, OP_HEAP_REPORT},
      {"exit with TESSERA_SHOW_STATS", 1024, OP_EXIT_STATS},
      {"exit with TESSERA_HEAP_REPORT", 1024, OP_EXIT_REPORT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
  return api_finish("api_small_stack");
}
