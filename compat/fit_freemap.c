/* fit_freemap.c — reserving and growing the side bitmap of fit_freemap.h.
 * Called by fit_brk.c, under the break lock, before new memory is handed to
 * an arena that has a map.
 */
#include "fit_freemap.h"

#include <errno.h>
#include <sys/mman.h>

/* Words made read-write at a time: 32 KiB of map for 16 MiB of heap. */
#define FIT_FREEMAP_WORD_STEP 4096u

int fit_freemap_cover(fit_freemap_t *m, const char *lo, const char *end) {
  const size_t total_words = FIT_FREEMAP_COVER / 16u / 64u;
  if (!m->base) {
    void *bits = mmap(NULL, total_words * sizeof(uint64_t), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                      -1, 0);
    if (bits == MAP_FAILED) return errno = ENOMEM, -1;
    m->bits = bits;
    m->base = (char *)((uintptr_t)lo & ~(uintptr_t)1023);
    m->words = 0;
  }
  if (lo < m->base || end < lo || (size_t)(end - m->base) >= FIT_FREEMAP_COVER) return errno = ENOMEM, -1;
  size_t want = (size_t)(end - m->base) / 16u / 64u + 1; /* words up to end's granule */
  if (want <= m->words) return 0;
  want = (want + FIT_FREEMAP_WORD_STEP - 1) / FIT_FREEMAP_WORD_STEP * FIT_FREEMAP_WORD_STEP;
  if (want > total_words) want = total_words;
  if (mprotect(m->bits + m->words, (want - m->words) * sizeof(uint64_t), PROT_READ | PROT_WRITE) != 0)
    return errno = ENOMEM, -1;
  m->words = want;
  return 0;
}
