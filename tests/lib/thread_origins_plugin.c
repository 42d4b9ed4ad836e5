/* thread_origins_plugin.c — the library lib.thread_origins' dlopen origin
 * loads: its constructor starts a thread (as some plugins do) that checks
 * __libc_single_threaded first and then runs the slow paths against the
 * loading thread (tests/lib/thread_origins.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>

static pthread_t plugin_thread;
static atomic_int plugin_saw_single = -1, plugin_failed;

static void *plugin_body(void *arg) {
  (void)arg;
  atomic_store(&plugin_saw_single, __libc_single_threaded);
  for (int r = 0; r < 4000; r++) {
    size_t n = (size_t)(200 << 10) + (size_t)(r % 7) * 300000;
    unsigned char *p = malloc(n);
    if (p == NULL) {
      atomic_store(&plugin_failed, 1);
      break;
    }
    memset(p, 0x5a, n);
    if (p[0] != 0x5a || p[n - 1] != 0x5a) atomic_store(&plugin_failed, 1);
    free(p);
  }
  return NULL;
}

__attribute__((constructor)) static void plugin_start(void) {
  if (pthread_create(&plugin_thread, NULL, plugin_body, NULL) != 0) atomic_store(&plugin_failed, 1);
}

void thread_origins_plugin_wait(void);
void thread_origins_plugin_wait(void) {
  pthread_join(plugin_thread, NULL);
  if (atomic_load(&plugin_saw_single) != 0) {
    fprintf(stderr, "FAIL: dlopen: the constructor's thread found __libc_single_threaded set\n");
    exit(1);
  }
  if (atomic_load(&plugin_failed)) {
    fprintf(stderr, "FAIL: dlopen: the constructor's thread lost a block\n");
    exit(1);
  }
}
