/* glibc_compat.c — glibc's malloc introspection calls, answered by libtessera.
 *
 * Programs and tools (and some language runtimes) call mallinfo2, mallinfo,
 * malloc_stats, malloc_info and malloc_trim. Under libtessera those must
 * describe libtessera's heap, not glibc's unused one. Everything here is
 * built on tes_stats_get (into the report scratch, not the caller's stack:
 * threads with 16 KiB stacks call these), tes_collect and the OS counters:
 * this file owns the mapping from tessera's gauges to glibc's fields and
 * nothing else.
 *
 * Mapping (glibc's field -> tessera's gauge). glibc counts its mmapped
 * chunks apart from the arenas: arena and uordblks leave them out and
 * hblkhd holds them, so a program's total in use is uordblks + hblkhd and
 * its total held arena + hblkhd. Tessera's large blocks (each in a segment
 * of its own) are those chunks:
 *   arena    = committed - large_in_use   bytes backed by the OS for the rest
 *   uordblks = in_use - large_in_use      usable bytes of live small/medium blocks
 *   fordblks = arena - uordblks           held but not in use
 *   hblkhd   = large_in_use               live blocks above the largest size class
 *   hblks    = live large blocks (they were not counted until 2026-11-22: 0
 *              beside a non-zero hblkhd)
 *   usmblks  = committed.peak             (obsolete in glibc, always 0 there)
 *   ordblks, smblks, fsmblks, keepcost: no equivalent, 0
 * so uordblks + fordblks == arena, the identity glibc's users rely on, and
 * uordblks + hblkhd == in_use, arena + hblkhd == committed. (Until
 * 2026-11-22 arena and uordblks included the large blocks too, and the
 * common uordblks + hblkhd counted every large block twice.)
 *
 * These symbols are only defined in the drop-in (override) builds, like the
 * standard names at the end of alloc.c: the tes_*-only build leaves glibc's own. */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>

#if defined(TES_OVERRIDE) && TES_OVERRIDE

#define TES_COMPAT_EXPORT __attribute__((visibility("default")))

static size_t clamp_nonnegative(int64_t value) { return value > 0 ? (size_t)value : 0; }

static int clamp_int(size_t value) { return value > (size_t)INT_MAX ? INT_MAX : (int)value; }

/* The mapping above, from one statistics snapshot (malloc_stats and
 * malloc_info print it beside other figures of the same snapshot). */
static struct mallinfo2 info_of(const tes_stats_t *stats) {
  struct mallinfo2 info = {0};
  info.hblkhd = clamp_nonnegative(stats->large_in_use.current);
  info.hblks = clamp_nonnegative(atomic_load_explicit(&tes_large_blocks, memory_order_relaxed));
  info.uordblks = clamp_nonnegative(stats->in_use.current - stats->large_in_use.current);
  info.arena = clamp_nonnegative(stats->committed.current - stats->large_in_use.current);
  if (info.arena < info.uordblks) info.arena = info.uordblks;
  info.fordblks = info.arena - info.uordblks;
  info.usmblks = clamp_nonnegative(stats->committed.peak);
  return info;
}

TES_COMPAT_EXPORT struct mallinfo2 mallinfo2(void) {
  tes_stats_t *stats = tes_report_scratch_take(sizeof *stats);
  tes_stats_get(stats);
  struct mallinfo2 info = info_of(stats);
  tes_report_scratch_give();
  return info;
}

/* The int-sized original: fields saturate at INT_MAX instead of wrapping
 * (glibc wraps; a saturated value is at least not misleadingly small). */
TES_COMPAT_EXPORT struct mallinfo mallinfo(void) {
  struct mallinfo2 wide = mallinfo2();
  struct mallinfo info = {0};
  info.arena = clamp_int(wide.arena);
  info.ordblks = clamp_int(wide.ordblks);
  info.smblks = clamp_int(wide.smblks);
  info.hblks = clamp_int(wide.hblks);
  info.hblkhd = clamp_int(wide.hblkhd);
  info.usmblks = clamp_int(wide.usmblks);
  info.fsmblks = clamp_int(wide.fsmblks);
  info.uordblks = clamp_int(wide.uordblks);
  info.fordblks = clamp_int(wide.fordblks);
  info.keepcost = clamp_int(wide.keepcost);
  return info;
}
/* glibc exports mallinfo under its internal name too, as it does malloc,
 * free (alloc.c) and mallopt (below): a caller of __libc_mallinfo got
 * glibc's own, empty, arena under LD_PRELOAD. */
struct mallinfo __libc_mallinfo(void);
TES_COMPAT_EXPORT struct mallinfo __libc_mallinfo(void) __attribute__((alias("mallinfo")));

/* glibc's layout ("Arena 0:", "system bytes", "in use bytes", then the
 * totals) so scripts that grep it keep working; tessera has one logical
 * arena, and its large blocks are glibc's mmapped chunks: in the totals, not
 * in the arena (as mallinfo2). Printed with fprintf to stderr, which is
 * unbuffered: no allocation. */
TES_COMPAT_EXPORT void malloc_stats(void) {
  tes_stats_t *stats = tes_report_scratch_take(sizeof *stats);
  tes_stats_get(stats);
  /* glibc's maxima of its mmapped chunks: the most large blocks live at once
   * and their peak bytes (before 2026-11-22: the mmap calls so far, which
   * only grew, and the peak address space of everything). */
  unsigned long mmap_regions = (unsigned long)clamp_nonnegative(atomic_load(&tes_large_blocks_peak));
  unsigned long mmap_peak = (unsigned long)clamp_nonnegative(stats->large_in_use.peak);
  struct mallinfo2 info = info_of(stats);
  tes_report_scratch_give();
  unsigned long system_bytes = (unsigned long)info.arena, in_use_bytes = (unsigned long)info.uordblks;
  unsigned long large_bytes = (unsigned long)info.hblkhd;
  fprintf(stderr,
          "Arena 0:\n"
          "system bytes     = %10lu\n"
          "in use bytes     = %10lu\n"
          "Total (incl. mmap):\n"
          "system bytes     = %10lu\n"
          "in use bytes     = %10lu\n"
          "max mmap regions = %10lu\n"
          "max mmap bytes   = %10lu\n",
          system_bytes, in_use_bytes, system_bytes + large_bytes, in_use_bytes + large_bytes, mmap_regions,
          mmap_peak);
}

/* XML in glibc's schema (<malloc version="1"><heap nr="0">...), with one
 * heap, per-class <size> entries for classes that have live blocks, and the
 * totals glibc reports; the large blocks are the "mmap" total, not in the
 * heap's system bytes (as mallinfo2). options must be 0, as in glibc. */
TES_COMPAT_EXPORT int malloc_info(int options, FILE *out) {
  if (options != 0 || out == NULL) return EINVAL; /* glibc returns EINVAL itself, errno untouched */
  tes_stats_t *stats = tes_report_scratch_take(sizeof *stats);
  tes_stats_get(stats);
  struct mallinfo2 info = info_of(stats);
  unsigned long committed = (unsigned long)info.arena; /* without the large blocks */
  unsigned long free_bytes = (unsigned long)info.fordblks;
  fprintf(out, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n");
  uint32_t classes = stats->class_count < TES_STATS_MAX_CLASSES ? stats->class_count : TES_STATS_MAX_CLASSES;
  for (uint32_t c = 0; c < classes; c++) {
    if (stats->class_live_blocks[c] <= 0) continue;
    fprintf(out, "  <size from=\"%lu\" to=\"%lu\" total=\"%lu\" count=\"%ld\"/>\n",
            (unsigned long)(c > 0 ? stats->class_block_size[c - 1] + 1 : 1),
            (unsigned long)stats->class_block_size[c],
            (unsigned long)(stats->class_block_size[c] * (uint64_t)stats->class_live_blocks[c]),
            (long)stats->class_live_blocks[c]);
  }
  fprintf(out,
          "</sizes>\n"
          "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
          "<total type=\"rest\" count=\"0\" size=\"%lu\"/>\n"
          "<system type=\"current\" size=\"%lu\"/>\n"
          "<system type=\"max\" size=\"%lu\"/>\n"
          "<aspace type=\"total\" size=\"%lu\"/>\n"
          "<aspace type=\"mprotect\" size=\"%lu\"/>\n"
          "</heap>\n",
          free_bytes, committed, (unsigned long)clamp_nonnegative(stats->committed.peak),
          (unsigned long)clamp_nonnegative(stats->reserved.current), committed);
  fprintf(out,
          "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
          "<total type=\"rest\" count=\"0\" size=\"%lu\"/>\n"
          "<total type=\"mmap\" count=\"%lu\" size=\"%lu\"/>\n"
          "<system type=\"current\" size=\"%lu\"/>\n"
          "<system type=\"max\" size=\"%lu\"/>\n"
          "<aspace type=\"total\" size=\"%lu\"/>\n"
          "<aspace type=\"mprotect\" size=\"%lu\"/>\n"
          "</malloc>\n",
          free_bytes, (unsigned long)info.hblks, (unsigned long)info.hblkhd, committed,
          (unsigned long)clamp_nonnegative(stats->committed.peak),
          (unsigned long)clamp_nonnegative(stats->reserved.current), committed);
  tes_report_scratch_give();
  return 0;
}

/* Returns 1 if memory was released to the OS, 0 otherwise, as glibc does.
 * `pad` (bytes to keep at the top of glibc's heap) has no meaning for a
 * segment allocator; everything that can be returned is. Released means the
 * committed gauge went down or the OS counters moved. */
TES_COMPAT_EXPORT int malloc_trim(size_t pad) {
  (void)pad;
  tes_os_counters_t before, after;
  tes_process_init();
  tes_os_counters(&before);
  tes_collect(true);
  tes_os_counters(&after);
  return after.committed < before.committed || after.purged_bytes > before.purged_bytes ||
                 after.munmap_bytes > before.munmap_bytes
             ? 1
             : 0;
}

/* glibc's tuning knobs (M_MMAP_THRESHOLD, M_ARENA_MAX, M_TRIM_THRESHOLD,
 * M_PERTURB, ...) describe glibc's arenas, which do not exist here: each is
 * accepted and ignored, with glibc 2.36's return value, so that code that
 * tunes glibc and checks the result keeps running: 1 for every parameter,
 * unknown ones included, except M_MXFAST outside 0..80 * sizeof(size_t) / 4
 * (0). Defining mallopt (and glibc's exported alias) also keeps a static
 * link from pulling glibc's malloc.o, whose malloc would clash with ours. */
TES_COMPAT_EXPORT int mallopt(int param, int value) {
  if (param == M_MXFAST && (value < 0 || (size_t)value > 80 * sizeof(size_t) / 4)) return 0;
  return 1;
}
int __libc_mallopt(int param, int value);
TES_COMPAT_EXPORT int __libc_mallopt(int param, int value) { return mallopt(param, value); }

#endif /* TES_OVERRIDE */
