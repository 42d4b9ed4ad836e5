/* medium_tail_rss.c — medium blocks the program never writes: the OS pages
 * past the canary must stay untouched (security.*_medium_tail_rss).
 *
 *   medium_tail_rss
 *
 * mallocs 64 blocks of 33,000 bytes (class 40 KiB: 32 KiB + 8 KiB steps,
 * src/size_class.h; with the hardened build's 8 bytes of padding too),
 * writes nothing, and counts with mincore the blocks of which an OS page
 * lying wholly after the canary (the 4 bytes right after the request) and
 * within the block is resident. The allocator may touch a block's first
 * page (its free-list link) and the page of the canary; a size word at the
 * block's end faulted in one more page of every block (fit-large: peak RSS
 * 2.3x the default build's, docs/RELIABILITY.md, seventeenth session).
 * Then frees the blocks (the hardened build checks each: no report
 * expected). Standard names only: run with the library under test
 * preloaded (exit 3 when no libtessera is loaded). Built with -fno-builtin.
 * Exit 0 when no such page is resident, 1 otherwise; skipped (exit 0, says
 * so) with OS pages other than 4 KiB, where the class has no such page. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

enum { BLOCKS = 64, REQUEST = 33000, CLASS = 40 * 1024 };

int main(void) {
  if (dlsym(RTLD_DEFAULT, "tes_malloc") == NULL) {
    fprintf(stderr, "medium_tail_rss: no libtessera loaded (LD_PRELOAD it)\n");
    return 3;
  }
  long ps = sysconf(_SC_PAGESIZE);
  if (ps != 4096) {
    printf("skipped: OS pages of %ld bytes\n", ps);
    return 0;
  }
  char *block[BLOCKS];
  for (int i = 0; i < BLOCKS; i++)
    if ((block[i] = malloc(REQUEST)) == NULL) {
      fprintf(stderr, "medium_tail_rss: malloc failed\n");
      return 1;
    }
  int resident = 0, probed = 0;
  for (int i = 0; i < BLOCKS; i++) {
    uintptr_t first = ((uintptr_t)block[i] + REQUEST + 4 + (uintptr_t)ps - 1) & ~(uintptr_t)(ps - 1);
    uintptr_t end = ((uintptr_t)block[i] + CLASS) & ~(uintptr_t)(ps - 1);
    int hit = 0;
    for (uintptr_t at = first; at < end; at += (uintptr_t)ps) {
      unsigned char vec = 0;
      if (mincore((void *)at, (size_t)ps, &vec) != 0) {
        perror("mincore");
        return 1;
      }
      probed++;
      hit |= vec & 1;
    }
    resident += hit;
  }
  for (int i = 0; i < BLOCKS; i++) free(block[i]);
  printf("%d of %d blocks with an OS page past the canary resident (%d pages probed)\n", resident, BLOCKS, probed);
  return resident == 0 && probed > 0 ? 0 : 1;
}
