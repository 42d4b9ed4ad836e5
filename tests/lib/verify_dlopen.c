/* verify_dlopen.c — libtessera.so loaded with dlopen after start-up.
 *
 *   verify_dlopen PATH/TO/libtessera.so
 *
 * The way a plugin or a Python extension would bring it in: the process runs
 * on glibc's malloc, then dlopens the library (RTLD_NOW | RTLD_LOCAL) and
 * uses its tes_* functions from several threads. This is where an allocator
 * with large initial-exec TLS fails ("cannot allocate memory in static TLS
 * block", PITFALLS 8), and where initialisation must not depend on having
 * been first. Blocks are checked for contents and usable size; the stats of
 * the loaded instance must account for the calls. (Not named api_*.c: it
 * needs the library's path and must not be linked with libtessera.) */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>

typedef void *malloc_fn(size_t);
typedef void free_fn(void *);
typedef size_t usable_fn(const void *);
typedef void stats_fn(tes_stats_t *);

static malloc_fn *loaded_malloc;
static free_fn *loaded_free;
static usable_fn *loaded_usable;

static void *use_library(void *arg) {
  long *bad = arg;
  enum { N = 2000 };
  void *blocks[N];
  size_t sizes[N];
  for (int i = 0; i < N; i++) {
    sizes[i] = 1 + (size_t)(i * 37) % 5000;
    blocks[i] = loaded_malloc(sizes[i]);
    if (!blocks[i] || loaded_usable(blocks[i]) < sizes[i]) {
      (*bad)++;
      continue;
    }
    api_fill(blocks[i], sizes[i]);
  }
  for (int i = 0; i < N; i++) {
    if (blocks[i] && api_verify(blocks[i], sizes[i]) != SIZE_MAX) (*bad)++;
    loaded_free(blocks[i]);
  }
  return NULL;
}

static pthread_barrier_t closed;
static void *allocate_then_wait(void *arg) {
  (void)arg;
  void *p = loaded_malloc(100);
  loaded_free(p);
  void *kept = loaded_malloc(5000); /* its heap keeps a page */
  (void)kept;
  pthread_barrier_wait(&closed);
  pthread_barrier_wait(&closed);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: verify_dlopen PATH/TO/libtessera.so\n");
    return 2;
  }
  API_GROUP("dlopen libtessera.so at run time");
  /* The process has been allocating with glibc before the library comes in. */
  void *before = malloc(1000);
  void *handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  REQUIRE(handle != NULL, "dlopen(%s): %s", argv[1], dlerror());
  loaded_malloc = (malloc_fn *)dlsym(handle, "tes_malloc");
  loaded_free = (free_fn *)dlsym(handle, "tes_free");
  loaded_usable = (usable_fn *)dlsym(handle, "tes_usable_size");
  stats_fn *loaded_stats = (stats_fn *)dlsym(handle, "tes_stats_get");
  REQUIRE(loaded_malloc && loaded_free && loaded_usable && loaded_stats, "tes_* symbols missing from %s", argv[1]);

  tes_stats_t s0, s1;
  loaded_stats(&s0);
  long bad[4] = {0, 0, 0, 0};
  pthread_t threads[3];
  for (int t = 0; t < 3; t++)
    REQUIRE(pthread_create(&threads[t], NULL, use_library, &bad[t + 1]) == 0, "pthread_create");
  use_library(&bad[0]);
  for (int t = 0; t < 3; t++) pthread_join(threads[t], NULL);
  loaded_stats(&s1);
  long total_bad = bad[0] + bad[1] + bad[2] + bad[3];
  CHECK(total_bad == 0, "%ld blocks failed, were too small or lost their contents", total_bad);
  CHECK(s1.malloc_calls - s0.malloc_calls == 4 * 2000, "the loaded library counted %" PRIu64 " mallocs, want 8000",
        s1.malloc_calls - s0.malloc_calls);
  CHECK(s1.in_use.current == s0.in_use.current, "in_use %+" PRId64 " after freeing everything",
        s1.in_use.current - s0.in_use.current);
  /* glibc's blocks from before are untouched and still glibc's to free. */
  free(before);

  /* dlclose while a thread that allocated is still alive: the thread's
   * exit runs the library's key destructor, so the library must stay
   * mapped (it is linked -z nodelete; before, this exit crashed). */
  API_GROUP("dlclose, then a thread that allocated exits");
  pthread_barrier_init(&closed, NULL, 2);
  pthread_t late;
  REQUIRE(pthread_create(&late, NULL, allocate_then_wait, NULL) == 0, "pthread_create");
  pthread_barrier_wait(&closed); /* it has allocated */
  CHECK(dlclose(handle) == 0, "dlclose: %s", dlerror());
  pthread_barrier_wait(&closed); /* now it exits */
  pthread_join(late, NULL);
  return api_finish("verify_dlopen");
}
