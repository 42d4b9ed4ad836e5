/* tail_estimate_rss.c — waiting tails of reused large segments must stay
 * near their bound however wrong the resident share that estimates them
 * (security.*_tail_estimate_rss).
 *
 *   tail_estimate_rss PAIRS WARMUP LIMIT_MIB
 *
 * WARMUP rounds of a 3.9 MiB block with two bytes written, freed, and a
 * 200 KiB block that takes its segment and is freed: every tail is sparse,
 * so the probed share falls to its floor. Then PAIRS pairs of live 200 KiB
 * blocks, each taking a segment the 3.9 MiB block left: one sparse, one
 * fully written (a tail of 3.7 MiB resident, estimated at about 1%). Run
 * with a purge delay of an hour (no tail comes due): passes (exit 0,
 * "within the bound") when the RSS above the start, less the live blocks,
 * is at most LIMIT_MIB. The pending bound is 8 MiB here; the estimated
 * tails may fall short by twice it (src/large.c, tail_list_unsure), so
 * 24 MiB at most wait. Before that cap 64 pairs kept 240 MiB. Standard
 * names only: run with the library under test preloaded (exit 3 when no
 * libtessera is loaded, so a broken preload cannot pass). */
#define _GNU_SOURCE
#include "api_check.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: tail_estimate_rss PAIRS WARMUP LIMIT_MIB\n");
    return 2;
  }
  if (dlsym(RTLD_DEFAULT, "tes_malloc") == NULL) {
    fprintf(stderr, "tail_estimate_rss: libtessera is not loaded\n");
    return 3;
  }
  int pairs = atoi(argv[1]), warmup = atoi(argv[2]);
  long limit_kib = atol(argv[3]) * 1024;
  const size_t big = (size_t)3900 << 10, small = (size_t)200 << 10;
  char **live = calloc(2 * (size_t)pairs, sizeof *live);
  if (live == NULL || pairs <= 0) return 2;
  long start = (long)(api_rss_bytes() / 1024);
  for (int i = 0; i < warmup; i++) {
    char *b = malloc(big), *s;
    if (b == NULL) return 2;
    b[0] = 1;
    b[big - 1] = 1;
    free(b);
    if ((s = malloc(small)) == NULL) return 2;
    memset(s, 2, small);
    free(s);
  }
  for (int i = 0; i < 2 * pairs; i++) {
    char *b = malloc(big);
    if (b == NULL) return 2;
    if (i % 2 == 0) {
      b[0] = 1;
      b[big - 1] = 1;
    } else {
      memset(b, 1, big);
    }
    free(b);
    if ((live[i] = malloc(small)) == NULL) return 2;
    memset(live[i], 2, small);
  }
  long over = (long)(api_rss_bytes() / 1024) - start - (long)(2 * (size_t)pairs * small / 1024);
  printf("rss above the start, less %d live blocks: %ld KiB (limit %ld)\n", 2 * pairs, over, limit_kib);
  for (int i = 0; i < 2 * pairs; i++) free(live[i]);
  free(live);
  if (over > limit_kib) {
    fprintf(stderr, "tail_estimate_rss: %ld KiB waiting, more than %ld\n", over, limit_kib);
    return 1;
  }
  printf("within the bound\n");
  return 0;
}
