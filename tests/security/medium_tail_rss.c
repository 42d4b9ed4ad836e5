/* medium_tail_rss.c — medium blocks and aligned large blocks the program
 * never writes: the OS pages past the canary must stay untouched
 * (security.*_medium_tail_rss, security.*_large_tail_rss).
 *
 *   medium_tail_rss [large]
 *
 * With no argument, mallocs 64 blocks of 33,000 bytes (class 40 KiB:
 * 32 KiB + 8 KiB steps, src/size_class.h; with the hardened build's 8 bytes
 * of padding too); writes nothing, and counts with mincore the blocks of
 * which an OS page lying wholly after the canary (the bytes right after
 * the request: 4 for medium blocks, 8 for large ones) and within the block
 * is resident. The allocator may touch a block's first page (its free-list
 * link) and the page of the canary; a size word at the block's end faulted
 * in one more page of every such block (fit-large: peak RSS 2.3x the
 * default build's, docs/RELIABILITY.md, seventeenth session).
 * With `large`, posix_memaligns 32 blocks instead: 4,096 bytes aligned to
 * 256 KiB and 65,636 aligned to 1 MiB (large: the alignment is above the
 * medium classes'), probing below p + alignment (a page not mapped is not
 * resident): the hardened build kept a large block's size in its last
 * word, up to the alignment past the canary (2.9 minor faults a fresh block
 * against 1.9; RELIABILITY.md, twenty-second session, hcanary22).
 * Then frees the blocks (the hardened build checks each: no report
 * expected). Standard names only: run with the library under test
 * preloaded (exit 3 when no libtessera is loaded). Built with -fno-builtin.
 * Exit 0 when no such page is resident, 1 otherwise; skipped (exit 0, says
 * so) with OS pages other than 4 KiB, where the class has no such page. */
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
  int resident = 0, probed = 0;
  for (int i = 0; i < count; i++) {
    uintptr_t first = ((uintptr_t)block[i] + request[i] + canary + (uintptr_t)ps - 1) & ~(uintptr_t)(ps - 1);
    uintptr_t end = ((uintptr_t)block[i] + span[i]) & ~(uintptr_t)(ps - 1);
    int hit = 0;
    for (uintptr_t at = first; at < end; at += (uintptr_t)ps) {
      unsigned char vec = 0;
      if (mincore((void *)at, (size_t)ps, &vec) != 0) {
        if (large && errno == ENOMEM) continue; /* past the mapping */
        perror("mincore");
        return 1;
      }
      probed++;
      hit |= vec & 1;
    }
    resident += hit;
  }
  for (int i = 0; i < count; i++) free(block[i]);
  printf("%d of %d blocks with an OS page past the canary resident (%d pages probed)\n", resident, count, probed);
  return resident == 0 && probed > 0 ? 0 : 1;
}
