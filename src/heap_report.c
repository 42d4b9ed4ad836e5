/* heap_report.c — the per-size-class occupancy summary (tes_heap_report),
 * and the exit hook behind `tessera run --heap-report`.
 *
 * The report walks every live block with tes_heap_visit and tallies blocks
 * and bytes per size class into fixed arrays: it must not
 * allocate through the heap it is walking (the visitor contract), and it
 * runs at exit when the heap may be in any state. Class sizes and the
 * committed/in-use gauges come from tes_stats_get. The tallies and the text
 * live in the report scratch (stats.c), not on the stack, and the text goes
 * out whole (tes_text_write) to the caller's stream, stderr by default.
 *
 * Exit hook: when the environment has TESSERA_HEAP_REPORT=1 a destructor
 * prints the report to stderr as the process exits (0 or unset: nothing;
 * anything else: one warning naming the variable). This is not one of the
 * tes_option_t options (the option table is part of the public header), but
 * it is read and parsed as they are (tes_os_getenv, tes_options_parse_long):
 * the same syntax, the same warning, ignored in secure execution. */
#include "internal.h"

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
  /* In the report scratch, not on the stack: the exit hook runs on whichever
   * thread calls exit, maybe one with a 16 KiB stack. */
  struct report_s {
    class_tally_t tally;
    tes_stats_t stats;
    char text[8192];
  } *r = tes_report_scratch_take(sizeof *r);
  static_assert(sizeof *r <= TES_REPORT_SCRATCH_BYTES, "fits the report scratch");
  tes_text_t text = {r->text, sizeof r->text, 0};
  tes_heap_visit(NULL, tally_block, &r->tally);
  tes_stats_get(&r->stats);

  uint64_t total_blocks = r->tally.large_blocks + r->tally.other_blocks, total_bytes = r->tally.large_bytes;
  for (int c = 0; c < TES_STATS_MAX_CLASSES; c++) {
    total_blocks += r->tally.blocks[c];
    total_bytes += r->tally.bytes[c];
  }
  uint64_t committed = r->stats.committed.current > 0 ? (uint64_t)r->stats.committed.current : 0;
  tes_text_add(&text, "tessera heap report: %llu live blocks, %llu bytes in use, %llu bytes committed (%.1f%% occupied)\n",
          (unsigned long long)total_blocks, (unsigned long long)total_bytes, (unsigned long long)committed,
          percent(total_bytes, committed));
  tes_text_add(&text, "%6s %12s %12s %14s %8s\n", "class", "block_size", "live_blocks", "live_bytes", "%bytes");
  uint32_t classes = r->stats.class_count < TES_STATS_MAX_CLASSES ? r->stats.class_count : TES_STATS_MAX_CLASSES;
  for (uint32_t c = 0; c < TES_STATS_MAX_CLASSES; c++) {
    if (r->tally.blocks[c] == 0) continue;
    unsigned long long block_size =
        c < classes ? (unsigned long long)r->stats.class_block_size[c] : r->tally.bytes[c] / r->tally.blocks[c];
    tes_text_add(&text, "%6u %12llu %12llu %14llu %7.1f%%\n", c, block_size, (unsigned long long)r->tally.blocks[c],
            (unsigned long long)r->tally.bytes[c], percent(r->tally.bytes[c], total_bytes));
  }
  if (r->tally.large_blocks)
    tes_text_add(&text, "%6s %12s %12llu %14llu %7.1f%%\n", "large", "-", (unsigned long long)r->tally.large_blocks,
            (unsigned long long)r->tally.large_bytes, percent(r->tally.large_bytes, total_bytes));
  if (r->tally.other_blocks)
    tes_text_add(&text, "(%llu blocks reported a class index beyond the statistics table)\n",
            (unsigned long long)r->tally.other_blocks);
  tes_text_write(&text, out);
  tes_report_scratch_give();
}

__attribute__((destructor)) static void heap_report_at_exit(void) {
  const char *text = tes_os_getenv("TESSERA_HEAP_REPORT"); /* none in secure execution, like the options */
  if (text == NULL) return;
  long value;
  if (!tes_options_parse_long(text, &value) || value < 0 || value > 1) {
    tes_message("warning: ignoring TESSERA_HEAP_REPORT=\"%.40s\": expected an integer in [0, 1]; no report", text);
    return;
  }
  if (value == 1) tes_heap_report(stderr);
}
