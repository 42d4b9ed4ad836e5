/* defer_bugs.c — one heap bug per mode, for defer.sh: under valgrind
 * memcheck or AddressSanitizer the tool's own allocator must serve the
 * program even when libtessera is preloaded or linked, so that each bug is
 * reported as it would be without libtessera.
 *
 *   defer_bugs MODE    MODE: overflow uaf uninit double_free leak usable clean
 *
 * `usable` prints malloc_usable_size(malloc(20)): 20 under memcheck's
 * allocator, 32 under libtessera's (its 32-byte class; glibc says 24).
 * `clean` is a small but varied workload with no bug (every size range,
 * calloc, realloc, aligned, threads that free each other's blocks, a fork):
 * memcheck must find nothing in it, whichever allocator serves. */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile sink;
static volatile size_t twenty = 20; /* a size the compiler cannot see, so the overflow is not folded away */

static void *worker(void *arg) {
  void **blocks = arg; /* blocks the main thread allocated: freed here */
  for (int i = 0; i < 64; i++) free(blocks[i]);
  for (int i = 0; i < 64; i++) {
    blocks[i] = malloc((size_t)(i * 37 % 3000) + 1);
    memset(blocks[i], i, (size_t)(i * 37 % 3000) + 1);
  }
  return NULL; /* the main thread frees these */
}

static int clean(void) {
  static void *blocks[64];
  size_t sizes[] = {0, 1, 16, 100, 1024, 5000, 40000, 200000, 3 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    unsigned char *p = malloc(sizes[i]);
    if (p == NULL) return 1;
    memset(p, 0xab, sizes[i]);
    unsigned char *z = calloc(1, sizes[i] + 1);
    if (z == NULL || z[sizes[i]] != 0) return 1;
    p = realloc(p, sizes[i] * 2 + 10);
    if (p == NULL || (sizes[i] > 0 && p[sizes[i] - 1] != 0xab)) return 1;
    free(p);
    free(z);
  }
  for (size_t align = 16; align <= 4096; align *= 4) {
    void *a = aligned_alloc(align, 3 * align);
    if (a == NULL || (size_t)a % align) return 1;
    memset(a, 1, 3 * align);
    free(a);
  }
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 64; i++) blocks[i] = malloc((size_t)i * 8 + 8);
    pthread_t t;
    if (pthread_create(&t, NULL, worker, blocks) != 0) return 1;
    pthread_join(t, NULL);
    for (int i = 0; i < 64; i++) free(blocks[i]);
  }
  pid_t pid = fork();
  if (pid == 0) {
    void *c = malloc(123);
    free(c);
    _exit(0);
  }
  int status;
  waitpid(pid, &status, 0);
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "clean";
  if (!strcmp(mode, "overflow")) {
    volatile char *p = malloc(twenty);
    p[twenty] = 1; /* one byte past the block */
    free((void *)p);
  } else if (!strcmp(mode, "uaf")) {
    long *volatile p = malloc(32);
    p[0] = 7;
    free(p);
    printf("%ld\n", p[0]); /* read after free */
  } else if (!strcmp(mode, "uninit")) {
    int *volatile p = malloc(64);
    if (p[3] > 5) puts("big"); /* branch on bytes never written */
    free(p);
  } else if (!strcmp(mode, "double_free")) {
    void *volatile p = malloc(48);
    free(p);
    free(p);
  } else if (!strcmp(mode, "leak")) {
    sink = malloc(100);
    sink = NULL; /* the only pointer is gone */
  } else if (!strcmp(mode, "usable")) {
    void *p = malloc(20);
    printf("usable=%zu\n", malloc_usable_size(p));
    free(p);
  } else if (!strcmp(mode, "clean")) {
    return clean();
  } else {
    fprintf(stderr, "defer_bugs: unknown mode %s\n", mode);
    return 2;
  }
  return 0;
}
