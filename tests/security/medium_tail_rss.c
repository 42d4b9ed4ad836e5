/* medium_tail_rss.c — medium blocks and aligned large blocks the program
 * never writes: which OS pages of them the allocator may make resident
 * (security.*_medium_tail_rss, security.*_large_tail_rss,
 * security.*_medium_fresh_pages).
 *
 *   medium_tail_rss [large | sizes]
 *
 * With no argument, mallocs 64 blocks of 33,000 bytes (class 40 KiB:
 * 32 KiB + 8 KiB steps, src/size_class.h; with the hardened build's 8 bytes
 * of padding too); writes nothing, and counts with mincore the OS pages
 * lying wholly within each block that are resident. The allocator may
 * touch two of them: the page of the canary (the bytes right after the
 * request: 4 for medium blocks, 8 for large ones) and the page holding the
 * block's free-list link (its first word in the default build; in the
 * hardened build the first word of its last 16 bytes, twenty-third
 * session, hlink23/hpark23). Fails when a block has more than two resident,
 * or when a page wholly after the canary's is resident other than the one
 * holding the block's last 16 bytes: a size word at the block's end once
 * faulted in one more page of every such block (fit-large: peak RSS 2.3x
 * the default build's, docs/RELIABILITY.md, seventeenth session).
 * With `large`, posix_memaligns 32 blocks instead: 4,096 bytes aligned to
 * 256 KiB and 65,636 aligned to 1 MiB (large: the alignment is above the
 * medium classes'), probing every page wholly after the canary below
 * p + alignment (a page not mapped is not resident): none may be resident;
 * the hardened build kept a large block's size in its last word, up to the
 * alignment past the canary (2.9 minor faults a fresh block against 1.9;
 * RELIABILITY.md, twenty-second session, hcanary22).
 * With `sizes`, mallocs 8 blocks of each of 121 medium requests (8,200 to
 * 128,200 bytes, 1,000 apart), all live at once, writes nothing, and counts
 * the resident pages among all the pages the blocks overlap (each block
 * taken as its class's size, request + 8 rounded up as src/size_class.h
 * does): at most MAX_PER_BLOCK pages a block. The hardened build with the
 * link in a block's first word kept two a block (the first page and the
 * canary's, 2.00); with the link at the end the canary's page is often the
 * link's too (1.55 over these sizes). Fails on the old layout; not a timing.
 * Then frees the blocks (the hardened build checks each: no report
 * expected). Standard names only: run with the library under test
 * preloaded (exit 3 when no libtessera is loaded). Built with -fno-builtin.
 * Exit 0 when it holds, 1 otherwise; skipped (exit 0, says so) with OS
 * pages other than 4 KiB. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { BLOCKS = 64, REQUEST = 33000, CLASS = 40 * 1024, LARGE_BLOCKS = 32 };
enum { SIZES_FIRST = 8200, SIZES_STEP = 1000, SIZES_COUNT = 121, SIZES_EACH = 8 };
#define MAX_PER_BLOCK 1.75 /* pages a fresh block, `sizes`: old layout 2.00 */

static int resident_at(uintptr_t at, long ps, int *ok) {
  unsigned char vec = 0;
  if (mincore((void *)at, (size_t)ps, &vec) != 0) {
    if (errno != ENOMEM) {
      perror("mincore");
      *ok = 0;
    }
    return -1; /* not mapped */
  }
  return vec & 1;
}

/* The class size of a medium block holding request + 8 bytes: four equal
 * steps per power of two above 8 KiB (src/size_class.h). */
static size_t medium_class(size_t request) {
  size_t s = request + 8, b = 63u - (size_t)__builtin_clzl(s - 1), step = (size_t)1 << (b - 2);
  return (s + step - 1) & ~(step - 1);
}

static int cmp_page(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static int fresh_pages(long ps) {
  static char *block[SIZES_COUNT * SIZES_EACH];
  static uintptr_t page[SIZES_COUNT * SIZES_EACH * 34];
  size_t n = 0, pages = 0;
  for (int k = 0; k < SIZES_COUNT; k++)
    for (int j = 0; j < SIZES_EACH; j++, n++) {
      size_t request = SIZES_FIRST + (size_t)k * SIZES_STEP;
      if ((block[n] = malloc(request)) == NULL) {
        fprintf(stderr, "medium_tail_rss: allocation failed\n");
        return 1;
      }
      uintptr_t at = (uintptr_t)block[n] & ~(uintptr_t)(ps - 1), end = (uintptr_t)block[n] + medium_class(request);
      for (; at < end; at += (uintptr_t)ps) page[pages++] = at;
    }
  qsort(page, pages, sizeof page[0], cmp_page);
  size_t distinct = 0, resident = 0;
  int ok = 1;
  for (size_t i = 0; i < pages; i++) {
    if (i > 0 && page[i] == page[i - 1]) continue;
    distinct++;
    resident += resident_at(page[i], ps, &ok) == 1;
  }
  for (size_t i = 0; i < n; i++) free(block[i]);
  double per = (double)resident / (double)n;
  printf("%zu of %zu pages resident for %zu fresh medium blocks: %.2f a block\n", resident, distinct, n, per);
  if (!ok || per > MAX_PER_BLOCK) return 1;
  printf("at most %.2f pages a fresh medium block\n", MAX_PER_BLOCK);
  return 0;
}

int main(int argc, char **argv) {
  if (dlsym(RTLD_DEFAULT, "tes_malloc") == NULL) {
    fprintf(stderr, "medium_tail_rss: no libtessera loaded (LD_PRELOAD it)\n");
    return 3;
  }
  long ps = sysconf(_SC_PAGESIZE);
  if (ps != 4096) {
    printf("skipped: OS pages of %ld bytes\n", ps);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "sizes") == 0) return fresh_pages(ps);
  int large = argc > 1 && strcmp(argv[1], "large") == 0, count = large ? LARGE_BLOCKS : BLOCKS;
  size_t canary = large ? 8 : 4;
  char *block[BLOCKS];
  size_t request[BLOCKS], span[BLOCKS]; /* span: the bytes from the block's start probed */
  for (int i = 0; i < count; i++) {
    request[i] = !large ? REQUEST : i < count / 2 ? 4096 : 65636;
    span[i] = !large ? CLASS : i < count / 2 ? (size_t)256 << 10 : (size_t)1 << 20;
    if (large ? posix_memalign((void **)&block[i], span[i], request[i]) != 0
              : (block[i] = malloc(request[i])) == NULL) {
      fprintf(stderr, "medium_tail_rss: allocation failed\n");
      return 1;
    }
  }
  int past = 0, over_two = 0, probed = 0, ok = 1;
  for (int i = 0; i < count; i++) {
    uintptr_t p = (uintptr_t)block[i], mask = ~(uintptr_t)(ps - 1);
    uintptr_t start = (p + (uintptr_t)ps - 1) & mask; /* the pages wholly within the block */
    uintptr_t first = (p + request[i] + canary + (uintptr_t)ps - 1) & mask; /* wholly after the canary */
    uintptr_t end = (p + span[i]) & mask;
    uintptr_t link = large ? 0 : (p + span[i] - 16) & mask; /* a medium block's last 16 bytes */
    int hit = 0, held = 0;
    for (uintptr_t at = large ? first : start; at < end; at += (uintptr_t)ps) {
      int r = resident_at(at, ps, &ok);
      if (r < 0) {
        if (large) continue; /* past the mapping */
        ok = 0;
        continue;
      }
      held += r;
      if (at < first) continue;
      probed++;
      if (at != link) hit |= r;
    }
    past += hit;
    over_two += held > 2;
  }
  for (int i = 0; i < count; i++) free(block[i]);
  if (large)
    printf("%d of %d blocks with an OS page past the canary resident (%d pages probed)\n", past, count, probed);
  else
    printf("%d of %d blocks with an OS page past the canary resident but the link's, %d with more than two "
           "resident (%d pages probed)\n",
           past, count, over_two, probed);
  return ok && past == 0 && over_two == 0 && probed > 0 ? 0 : 1;
}
