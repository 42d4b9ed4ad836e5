/* large_tail_rss.c — aligned large blocks the program never writes: the OS
 * pages past the canary must stay untouched (security.*_large_tail_rss).
 *
 *   large_tail_rss
 *
 * posix_memaligns 16 blocks of 4,096 bytes aligned to 256 KiB and 16 of
 * 65,636 bytes aligned to 1 MiB (large blocks: the alignment is above the
 * medium classes'), writes nothing, and counts with mincore the blocks of
 * which an OS page lying wholly after the canary (the 8 bytes right after
 * the request) and below p + alignment is resident (a page not mapped
 * counts as not resident). The hardened build placed a large block's
 * requested size in the block's last word, up to the alignment past the
 * canary: one more page faulted in for every such block (2.9 minor faults
 * a block against 1.9; docs/RELIABILITY.md, twenty-second session,
 * hcanary22). Then frees the blocks (the hardened build checks each: no
 * report expected). Standard names only: run with the library under test
 * preloaded (exit 3 when no libtessera is loaded). Built with -fno-builtin.
 * Exit 0 when no such page is resident, 1 otherwise; skipped (exit 0, says
 * so) with OS pages other than 4 KiB. Not a timing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

enum { BLOCKS = 32 };

int main(void) {
  if (dlsym(RTLD_DEFAULT, "tes_malloc") == NULL) {
    fprintf(stderr, "large_tail_rss: no libtessera loaded (LD_PRELOAD it)\n");
    return 3;
  }
  long ps = sysconf(_SC_PAGESIZE);
  if (ps != 4096) {
    printf("skipped: OS pages of %ld bytes\n", ps);
    return 0;
  }
  char *block[BLOCKS];
  size_t request[BLOCKS], align[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) {
    request[i] = i < BLOCKS / 2 ? 4096 : 65636;
    align[i] = i < BLOCKS / 2 ? (size_t)256 << 10 : (size_t)1 << 20;
    if (posix_memalign((void **)&block[i], align[i], request[i]) != 0) {
      fprintf(stderr, "large_tail_rss: posix_memalign failed\n");
      return 1;
    }
  }
  int resident = 0, probed = 0;
  for (int i = 0; i < BLOCKS; i++) {
    uintptr_t first = ((uintptr_t)block[i] + request[i] + 8 + (uintptr_t)ps - 1) & ~(uintptr_t)(ps - 1);
    uintptr_t end = (uintptr_t)block[i] + align[i];
    int hit = 0;
    for (uintptr_t at = first; at < end; at += (uintptr_t)ps) {
      unsigned char vec = 0;
      if (mincore((void *)at, (size_t)ps, &vec) != 0) {
        if (errno == ENOMEM) continue; /* not mapped */
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
