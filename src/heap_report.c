/* heap_report.c — the per-size-class occupancy summary (tes_heap_report),
 * and the exit hook behind `tessera run --heap-report`.
 *
 * The report walks every live block with tes_heap_visit and tallies blocks
 * and bytes per size class into fixed arrays on the stack: it must not
 * allocate through the heap it is walking (the visitor contract), and it
 * runs at exit when the heap may be in any state. Class sizes and the
 * committed/in-use gauges come from tes_stats_get. Output goes through
 * fprintf to the caller's stream (stderr by default, unbuffered).
 *
 * Exit hook: when the environment has TESSERA_HEAP_REPORT=1 a destructor
 * prints the report to stderr as the process exits (0 or unset: nothing;
 * anything else: one warning naming the variable, like the options). This is not one of the
 * tes_option_t options (the option table is part of the public header), so
 * the variable is read here with getenv, which does not allocate. */
#include "tessera.h"

#include <stdlib.h>
#include <string.h>

typedef struct class_tally_s {
  uint64_t blocks[TES_STATS_MAX_CLASSES];
  uint64_t bytes[TES_STATS_MAX_CLASSES];
  uint64_t large_blocks, large_bytes;
  uint64_t other_blocks; /* class index out of the stats table's range */
} class_tally_t;

static bool tally_block(const tes_block_info_t *block, void *arg) {
  class_tally_t *tally = arg;
  if (block->size_class == UINT32_MAX) {
    tally->large_blocks++;
    tally->large_bytes += block->usable_size;
  } else if (block->size_class < TES_STATS_MAX_CLASSES) {
    tally->blocks[block->size_class]++;
    tally->bytes[block->size_class] += block->usable_size;
  } else {
    tally->other_blocks++;
  }
  return true;
}

static double percent(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

__attribute__((visibility("default"))) void tes_heap_report(FILE *out) {
  if (out == NULL) out = stderr;
  class_tally_t tally;
  memset(&tally, 0, sizeof tally);
  tes_heap_visit(NULL, tally_block, &tally);
  tes_stats_t stats;
  tes_stats_get(&stats);

  uint64_t total_blocks = tally.large_blocks + tally.other_blocks, total_bytes = tally.large_bytes;
  for (int c = 0; c < TES_STATS_MAX_CLASSES; c++) {
    total_blocks += tally.blocks[c];
    total_bytes += tally.bytes[c];
  }
  uint64_t committed = stats.committed.current > 0 ? (uint64_t)stats.committed.current : 0;
  fprintf(out, "tessera heap report: %llu live blocks, %llu bytes in use, %llu bytes committed (%.1f%% occupied)\n",
          (unsigned long long)total_blocks, (unsigned long long)total_bytes, (unsigned long long)committed,
          percent(total_bytes, committed));
  fprintf(out, "%6s %12s %12s %14s %8s\n", "class", "block_size", "live_blocks", "live_bytes", "%bytes");
  uint32_t classes = stats.class_count < TES_STATS_MAX_CLASSES ? stats.class_count : TES_STATS_MAX_CLASSES;
  for (uint32_t c = 0; c < TES_STATS_MAX_CLASSES; c++) {
    if (tally.blocks[c] == 0) continue;
    unsigned long long block_size =
        c < classes ? (unsigned long long)stats.class_block_size[c] : tally.bytes[c] / tally.blocks[c];
    fprintf(out, "%6u %12llu %12llu %14llu %7.1f%%\n", c, block_size, (unsigned long long)tally.blocks[c],
            (unsigned long long)tally.bytes[c], percent(tally.bytes[c], total_bytes));
  }
  if (tally.large_blocks)
    fprintf(out, "%6s %12s %12llu %14llu %7.1f%%\n", "large", "-", (unsigned long long)tally.large_blocks,
            (unsigned long long)tally.large_bytes, percent(tally.large_bytes, total_bytes));
  if (tally.other_blocks)
    fprintf(out, "(%llu blocks reported a class index beyond the statistics table)\n",
            (unsigned long long)tally.other_blocks);
}

__attribute__((destructor)) static void heap_report_at_exit(void) {
  const char *value = getenv("TESSERA_HEAP_REPORT");
  if (value == NULL) return;
  /* Surrounding blanks are accepted, as the other TESSERA_* options accept them. */
  size_t start = strspn(value, " \t"), len = strlen(value + start);
  while (len > 0 && (value[start + len - 1] == ' ' || value[start + len - 1] == '\t')) len--;
  if (len == 0 || (len == 1 && value[start] == '0')) return;
  if (len == 1 && value[start] == '1')
    tes_heap_report(stderr);
  else
    fprintf(stderr, "tessera: warning: TESSERA_HEAP_REPORT=%s is invalid (accepted: 0 or 1); no report\n", value);
}
