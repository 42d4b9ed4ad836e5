/* api_large_vm.c — what large blocks (above 128 KiB) cost in address space
 * and resident memory, with the standard names only (so it also runs under
 * LD_PRELOAD of the default and the hardened library: lib.api_large_vm.preload
 * and .secure).
 *
 *   many     2,000 live blocks of 200 KiB must not map more than twice
 *            what they hold: each used to take a whole 4 MiB segment (20x:
 *            80 GB for 20,000 of them, so RLIMIT_AS or overcommit mode 2
 *            stopped malloc at a tenth of what glibc serves).
 *   shrink   40 blocks of 16 MiB, written through, realloc'ed to 256 KiB:
 *            their contents stay, and neither RSS nor the address space may
 *            keep the 640 MiB (the mapping kept all of it, and the hardened
 *            build kept it resident too); then grown back to 8 MiB, written
 *            and checked, and freed.
 *   grow     1,000 blocks of 200 KiB realloc'ed to 300 KiB: at most 2.5x
 *            what they hold mapped (growth took whole 4 MiB units: 4 GB).
 *   huge     malloc and calloc of twice RAM and swap together fail with
 *            ENOMEM, as glibc's do, unless vm.overcommit_memory is 1
 *            (always overcommit): they succeeded with MAP_NORESERVE.
 *   reuse    64 blocks of 3 MiB freed and left to be purged in the segment
 *            cache, then 64 of 200 KiB, which take those 4 MiB segments:
 *            committed must count what they use, not the whole segments
 *            (it counted 252 MiB for 12 MiB in use).
 *   append   a buffer grown by realloc in 64 KiB steps to 64 MiB, written as
 *            it grows: right after, RSS may not exceed it by a quarter (the
 *            hardened build, which copies such a buffer O(log n) times, left
 *            each old copy resident in the segment cache: 2x; at the moment
 *            of a copy both copies are resident, as with any copying
 *            realloc, so the peak is not what is checked).
 *   rlimit   in a child whose RLIMIT_AS leaves 6 MiB above what it maps, a
 *            new thread (no segment of its own, the segment cache emptied
 *            by malloc_trim) must get 1 MiB of small blocks: its first
 *            segment was mapped 8 MiB wide to be trimmed to its alignment,
 *            and malloc failed when that did not fit.
 *   startup  the process's address space after a first small malloc, before
 *            anything else: under 32 MiB (the segment map alone took 32
 *            MiB of BSS, one byte per 4 MiB unit; it is two bits now).
 *            RLIMIT_AS counts all of it: `ulimit -v` users pay it up front.
 *   tail     20 blocks of 16 MiB, written through, realloc'ed to 9 MiB (too
 *            little to shrink the mapping: the tail is purged): the
 *            committed bytes (mallinfo2's arena + hblkhd) must go down with RSS
 *            (they kept the whole 320 MiB). */
#include "api_check.h"

#include <malloc.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>




static void many(void) {
  API_GROUP("many");
  enum { N = 2000 };
  static char *blocks[N];
  const size_t size = 200 << 10;
  int64_t vsz0 = api_vsz_bytes();
  for (int i = 0; i < N; i++) {
    blocks[i] = malloc(size);
    REQUIRE(blocks[i] != NULL, "malloc %d", i);
    blocks[i][0] = (char)i;
    blocks[i][size - 1] = (char)i;
  }
  int64_t grown = api_vsz_bytes() - vsz0, live = (int64_t)N * (int64_t)size;
  CHECK(grown < 2 * live, "%d blocks of 200 KiB (%lld MiB) mapped %lld MiB more", N, (long long)(live / MIB),
        (long long)(grown / MIB));
  printf("many: %d x 200 KiB (%lld MiB live): address space +%lld MiB\n", N, (long long)(live / MIB),
         (long long)(grown / MIB));
  for (int i = 0; i < N; i++) {
    CHECK(blocks[i][0] == (char)i && blocks[i][size - 1] == (char)i, "block %d changed", i);
    free(blocks[i]);
  }
}

static void shrink(void) {
  API_GROUP("shrink");
  enum { N = 40 };
  static unsigned char *blocks[N];
  const size_t big = 16 << 20, small = 256 << 10, regrow = 8 << 20;
  int64_t rss0 = api_rss_bytes(), vsz0 = api_vsz_bytes();
  for (int i = 0; i < N; i++) {
    blocks[i] = malloc(big);
    REQUIRE(blocks[i] != NULL, "malloc %d", i);
    for (size_t j = 0; j < big; j += 4096) blocks[i][j] = (unsigned char)(i + j / 4096);
  }
  for (int i = 0; i < N; i++) {
    unsigned char *p = realloc(blocks[i], small);
    REQUIRE(p != NULL, "realloc %d", i);
    blocks[i] = p;
  }
  int64_t rss = api_rss_bytes() - rss0, vsz = api_vsz_bytes() - vsz0, live = (int64_t)N * (int64_t)small;
  printf("shrink: %d x 16 MiB -> 256 KiB (%lld MiB live): RSS +%lld MiB, address space +%lld MiB\n", N,
         (long long)(live / MIB), (long long)(rss / MIB), (long long)(vsz / MIB));
  CHECK(rss < 4 * live, "RSS +%lld MiB for %lld MiB live", (long long)(rss / MIB), (long long)(live / MIB));
  CHECK(vsz < 4 * live, "address space +%lld MiB for %lld MiB live", (long long)(vsz / MIB),
        (long long)(live / MIB));
  for (int i = 0; i < N; i++) {
    for (size_t j = 0; j < small; j += 4096)
      if (blocks[i][j] != (unsigned char)(i + j / 4096)) {
        CHECK(false, "block %d changed at %zu after the shrink", i, j);
        break;
      }
    unsigned char *p = realloc(blocks[i], regrow);
    REQUIRE(p != NULL, "regrow %d", i);
    blocks[i] = p;
    for (size_t j = 0; j < small; j += 4096)
      if (p[j] != (unsigned char)(i + j / 4096)) {
        CHECK(false, "block %d changed at %zu after growing again", i, j);
        break;
      }
    memset(p, 0xa5, regrow);
  }
  for (int i = 0; i < N; i++) {
    CHECK(blocks[i][regrow - 1] == 0xa5, "block %d", i);
    free(blocks[i]);
  }
}

static void grow(void) {
  API_GROUP("grow");
  enum { N = 1000 };
  static char *blocks[N];
  malloc_trim(0);
  int64_t vsz0 = api_vsz_bytes();
  for (int i = 0; i < N; i++) {
    blocks[i] = malloc(200 << 10);
    REQUIRE(blocks[i] != NULL, "malloc %d", i);
    blocks[i][0] = (char)i;
  }
  for (int i = 0; i < N; i++) {
    char *p = realloc(blocks[i], 300 << 10);
    REQUIRE(p != NULL, "realloc %d", i);
    blocks[i] = p;
    p[(300 << 10) - 1] = (char)i;
  }
  int64_t grown = api_vsz_bytes() - vsz0, live = (int64_t)N * (300 << 10);
  printf("grow: %d x 200 KiB -> 300 KiB (%lld MiB live): address space +%lld MiB\n", N, (long long)(live / MIB),
         (long long)(grown / MIB));
  CHECK(grown < live * 5 / 2, "address space +%lld MiB for %lld MiB live", (long long)(grown / MIB),
        (long long)(live / MIB));
  for (int i = 0; i < N; i++) {
    CHECK(blocks[i][0] == (char)i && blocks[i][(300 << 10) - 1] == (char)i, "block %d changed", i);
    free(blocks[i]);
  }
}

/* A number from a /proc file: the first integer after `key` (in kB for
 * /proc/meminfo), or -1. open/read: no allocation. */
static long long proc_number(const char *path, const char *key) {
  char text[4096];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  const char *p = key ? strstr(text, key) : text;
  if (p == NULL) return -1;
  if (key) p += strlen(key);
  while (*p == ' ' || *p == '\t') p++;
  long long v = 0;
  if (*p < '0' || *p > '9') return -1;
  for (; *p >= '0' && *p <= '9'; p++) v = v * 10 + (*p - '0');
  return v;
}

static void huge(void) {
  API_GROUP("huge");
  long long mode = proc_number("/proc/sys/vm/overcommit_memory", NULL);
  long long ram_kb = proc_number("/proc/meminfo", "MemTotal:"), swap_kb = proc_number("/proc/meminfo", "SwapTotal:");
  if (mode == 1 || ram_kb <= 0 || swap_kb < 0) {
    printf("huge: skipped (overcommit_memory %lld)\n", mode);
    return;
  }
  size_t size = (size_t)(ram_kb + swap_kb) * 1024 * 2;
  errno = 0;
  void *p = malloc(size);
  CHECK(p == NULL && errno == ENOMEM, "malloc(%zu) = %p, errno %d", size, p, errno);
  free(p);
  errno = 0;
  p = calloc(1, size);
  CHECK(p == NULL && errno == ENOMEM, "calloc(1, %zu) = %p, errno %d", size, p, errno);
  free(p);
  void *small = malloc(100); /* and the allocator goes on */
  CHECK(small != NULL, "malloc(100) after the failures");
  free(small);
  printf("huge: malloc and calloc of %llu GiB refused (overcommit_memory %lld)\n",
         (unsigned long long)(size >> 30), mode);
}

static void append(void) {
  API_GROUP("append");
  malloc_trim(0);
  int64_t base = api_rss_bytes();
  const size_t step = 64 << 10, final = 64 << 20;
  char *buf = NULL;
  for (size_t size = step; size <= final; size += step) {
    char *p = realloc(buf, size);
    REQUIRE(p != NULL, "realloc to %zu", size);
    buf = p;
    memset(buf + size - step, (int)(size / step), step);
  }
  int64_t rss = api_rss_bytes() - base;
  printf("append: a buffer grown to 64 MiB by 64 KiB steps: RSS +%lld MiB\n", (long long)(rss / MIB));
  CHECK(rss < (int64_t)final * 5 / 4, "RSS +%lld MiB", (long long)(rss / MIB));
  CHECK(buf[0] == 1 && buf[final - 1] == (char)(final / step), "contents");
  free(buf);
}

static int start_pipe[2];

static void *rlimit_thread(void *unused) {
  (void)unused;
  char go;
  if (read(start_pipe[0], &go, 1) != 1) return (void *)2;
  for (size_t served = 0; served < (1 << 20); served += 64) {
    char *p = malloc(64);
    if (p == NULL) return (void *)1;
    p[0] = 1;
  }
  return NULL;
}

static void rlimit(void) {
  API_GROUP("rlimit");
  fflush(NULL);
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    malloc_trim(0); /* no cached segment to take */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10);
    pthread_t t;
    if (pipe(start_pipe) != 0 || pthread_create(&t, &attr, rlimit_thread, NULL) != 0) _exit(77);
    struct rlimit lim;
    lim.rlim_cur = lim.rlim_max = (rlim_t)(api_vsz_bytes() + 6 * MIB);
    if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(77);
    void *result = (void *)3;
    if (write(start_pipe[1], "g", 1) != 1 || pthread_join(t, &result) != 0) _exit(77);
    _exit(result == NULL ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    printf("rlimit: skipped (setrlimit failed)\n");
    return;
  }
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a new thread 6 MiB below RLIMIT_AS could not get 1 MiB of "
        "small blocks (status %#x)", (unsigned)status);
}

/* Committed bytes as glibc's view tells them: the arena plus the large
 * blocks (hblkhd), which glibc and libtessera keep apart. */
static int64_t committed_now(void) {
  struct mallinfo2 info = mallinfo2();
  return (int64_t)(info.arena + info.hblkhd);
}

static void reuse(void) {
  API_GROUP("reuse");
  enum { N = 64 };
  static char *blocks[N];
  malloc_trim(0);
  int64_t arena0 = committed_now();
  for (int i = 0; i < N; i++) {
    blocks[i] = malloc(3 << 20);
    REQUIRE(blocks[i] != NULL, "malloc %d", i);
    memset(blocks[i], 1, 3 << 20);
  }
  for (int i = 0; i < N; i++) free(blocks[i]);
  api_sleep_ms(500); /* past the purge delay (up to 4 x 25 ms): the next large malloc purges the cache */
  for (int i = 0; i < N; i++) {
    blocks[i] = malloc(200 << 10);
    REQUIRE(blocks[i] != NULL, "malloc %d", i);
    memset(blocks[i], 2, 200 << 10);
  }
  int64_t arena = committed_now() - arena0, live = (int64_t)N * (200 << 10);
  printf("reuse: %d x 200 KiB in cached segments: committed +%lld MiB for %lld MiB live\n", N,
         (long long)(arena / MIB), (long long)(live / MIB));
  CHECK(arena < 3 * live, "committed +%lld MiB for %lld MiB live", (long long)(arena / MIB), (long long)(live / MIB));
  for (int i = 0; i < N; i++) free(blocks[i]);
}

static void tail(void) {
  API_GROUP("tail");
  enum { N = 20 };
  static unsigned char *blocks[N];
  const size_t big = 16 << 20, kept = 9 << 20;
  malloc_trim(0); /* no cached segment from the groups before: they would come and go in `arena` */
  int64_t arena0 = committed_now();
  for (int i = 0; i < N; i++) {
    blocks[i] = malloc(big);
    REQUIRE(blocks[i] != NULL, "malloc %d", i);
    memset(blocks[i], i + 1, big);
  }
  for (int i = 0; i < N; i++) {
    unsigned char *p = realloc(blocks[i], kept);
    REQUIRE(p != NULL, "realloc %d", i);
    blocks[i] = p;
  }
  int64_t arena = committed_now() - arena0;
  printf("tail: %d x 16 MiB -> 9 MiB: committed (arena) +%lld MiB\n", N, (long long)(arena / MIB));
  CHECK(arena < (int64_t)N * 11 * MIB, "committed +%lld MiB for %d blocks of 9 MiB", (long long)(arena / MIB), N);
  for (int i = 0; i < N; i++) {
    CHECK(blocks[i][0] == i + 1 && blocks[i][kept - 1] == i + 1, "block %d changed", i);
    free(blocks[i]);
  }
}

static void startup(int64_t vsz) {
  API_GROUP("startup");
  printf("startup: %lld KiB of address space after the first malloc\n", (long long)(vsz >> 10));
  CHECK(vsz < 32 * MIB, "%lld MiB of address space after one malloc", (long long)(vsz / MIB));
}

int main(int argc, char **argv) {
  free(malloc(16));
  int64_t vsz = api_vsz_bytes();
  api_require_tessera_if_asked(argc, argv);
  startup(vsz);
  many();
  shrink();
  grow();
  huge();
  append();
  rlimit();
  reuse();
  tail();
  return api_finish("api_large_vm");
}
