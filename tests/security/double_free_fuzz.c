/* double_free_fuzz.c — the hardened build in continue mode
 * (TESSERA_ABORT_ON_ERROR=0, the library preloaded): threads in rounds
 * (each round's threads exit, their heaps parked and adopted) allocate
 * small, medium, large and aligned blocks (malloc, calloc, posix_memalign,
 * realloc in place and moved), free their own and each other's (remote),
 * and free again blocks freed before and not handed out since. Every such
 * double free must be reported, one line each (the freed tag of the size
 * word: the end word of a small block, a medium block's slot, a large
 * block's segment header), and no live block may overlap another or lose
 * its first and last bytes. Review22 (twenty-second session): the free
 * fast path that tells a small page from a medium one by the slice tag
 * (hfree22), the large block's size in its segment header (hcanary22),
 * the shuffle's pools (hpy22), in one run. Exit 0 when every count
 * matches; the reports go to a temporary file (fd 2) counted at the end. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 3
#define LIVE 300
#define FREED 64
typedef struct {
  unsigned char *p;
  size_t n;
} blk_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t start;
static blk_t live[THREADS * LIVE];
static unsigned char *freed[FREED]; /* freed, not handed out again since */
static long made;

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}
static size_t pick(uint64_t *s) {
  unsigned r = rnd(s) % 100;
  if (r < 50) return 2 + rnd(s) % 1024;
  if (r < 70) return 1024 + rnd(s) % (8 * 1024);
  if (r < 95) return 8 * 1024 + rnd(s) % (120 * 1024);
  return 128 * 1024 + rnd(s) % (1 << 20);
}
static void fail(const char *what, const void *p) {
  dprintf(1, "FAIL %s %p\n", what, p);
  _exit(1);
}
static void check(const blk_t *b) {
  if (b->p[0] != (unsigned char)(uintptr_t)b->p || b->p[b->n - 1] != (unsigned char)b->n) fail("data", b->p);
}
static void mark(blk_t *b) {
  b->p[0] = (unsigned char)(uintptr_t)b->p;
  b->p[b->n - 1] = (unsigned char)b->n;
}
/* A new block: no longer a freed one; overlaps no live block. */
static void handed_out(unsigned char *p, size_t n) {
  if (p == NULL) fail("out of memory", NULL);
  for (int i = 0; i < FREED; i++)
    if (freed[i] >= p && freed[i] < p + n) freed[i] = NULL;
  for (int i = 0; i < THREADS * LIVE; i++)
    if (live[i].p && p < live[i].p + live[i].n && live[i].p < p + n) fail("overlap", p);
}

static void *run(void *arg) {
  uintptr_t id = (uintptr_t)arg;
  uint64_t s = (id + 1) * 0x9E3779B97F4A7C15ull | 1;
  blk_t *mine = &live[(id & 0xff) * LIVE];
  pthread_barrier_wait(&start); /* every thread of the round created: libc allocates no more */
  for (long it = 0; it < 6000; it++) {
    pthread_mutex_lock(&mu);
    unsigned op = rnd(&s) % 100;
    if (op < 3) { /* a double free */
      unsigned char *p = freed[rnd(&s) % FREED];
      if (p) {
        made++;
        free(p);
      }
    } else if (op < 6) { /* anyone's block: remote, mostly */
      blk_t *b = &live[rnd(&s) % (THREADS * LIVE)];
      if (b->p) {
        check(b);
        free(b->p);
        freed[rnd(&s) % FREED] = b->p;
        b->p = NULL;
      }
    } else {
      blk_t *b = &mine[rnd(&s) % LIVE];
      if (b->p && op < 20) {
        check(b);
        size_t n = pick(&s);
        unsigned char *old = b->p;
        b->p = NULL;
        /* Freed if realloc moves it; handed_out drops it again if not. */
        if (rnd(&s) % 2) freed[rnd(&s) % FREED] = old;
        unsigned char *q = realloc(old, n);
        if (q == NULL) fail("realloc", NULL);
        handed_out(q, n);
        b->p = q;
        b->n = n;
        mark(b);
      } else if (b->p) {
        check(b);
        free(b->p);
        freed[rnd(&s) % FREED] = b->p;
        b->p = NULL;
      } else {
        size_t n = pick(&s);
        unsigned char *q = NULL;
        if (op < 30) {
          if (posix_memalign((void **)&q, (size_t)16 << (rnd(&s) % 13), n)) fail("posix_memalign", NULL);
        } else if (op < 40) {
          q = calloc(1, n);
          if (q && (q[0] || q[n / 2] || q[n - 1])) fail("calloc", q);
        } else {
          q = malloc(n);
        }
        handed_out(q, n);
        b->p = q;
        b->n = n;
        mark(b);
      }
    }
    pthread_mutex_unlock(&mu);
  }
  return NULL;
}

int main(void) {
  char path[] = "/tmp/tessera_dff_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0 || dup2(fd, 2) < 0) return 2;
  unlink(path);
  for (uintptr_t r = 0; r < 4; r++) {
    memset(freed, 0, sizeof freed); /* libc may take any of them at the next pthread_create */
    pthread_barrier_init(&start, NULL, THREADS);
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
      if (pthread_create(&t[i], NULL, run, (void *)(r << 8 | i))) return 2;
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
  }
  /* Count the report lines. */
  static char buf[1 << 16];
  long reports = 0, other = 0, at_line_start = 1;
  static const char prefix[] = "tessera: error: ";
  size_t matched = 0;
  lseek(fd, 0, SEEK_SET);
  for (ssize_t got; (got = read(fd, buf, sizeof buf)) > 0;) {
    for (ssize_t i = 0; i < got; i++) {
      char c = buf[i];
      if (at_line_start && matched < sizeof prefix - 1) {
        if (c == prefix[matched]) {
          if (++matched == sizeof prefix - 1) reports++;
          continue;
        }
        if (c != '\n') other++, at_line_start = 0;
      }
      if (c == '\n') at_line_start = 1, matched = 0;
    }
  }
  dprintf(1, "double frees made %ld, reported %ld, other lines %ld\n", made, reports, other);
  if (made < 1000 || reports != made || other != 0) return 1;
  return 0;
}
