/* options.c — every tunable in ONE table: name, default, accepted range.
 * Each is read once at start-up from TESSERA_<NAME> (upper case) without
 * allocating; an invalid or out-of-range value prints one warning naming the
 * variable and the accepted range and keeps the default. tes_option_set
 * changes a value at run time (same range check). Reads on hot paths are
 * plain loads of tes_option_values[]. */
#include "internal.h"

typedef struct tes_option_desc_s {
  const char *name;
  long default_value, min, max;
} tes_option_desc_t;

static const tes_option_desc_t option_table[TES_OPTION_COUNT] = {
    [TES_OPTION_SHOW_STATS] = {"show_stats", 0, 0, 1},
    [TES_OPTION_VERBOSE] = {"verbose", 0, 0, 1},
    [TES_OPTION_PURGE_DELAY_MS] = {"purge_delay_ms", 25, 0, 3600000},
    [TES_OPTION_SEGMENT_CACHE] = {"segment_cache", 64, 0, TES_SEGMENT_CACHE_MAX},
    [TES_OPTION_HUGE_PAGES] = {"huge_pages", 0, 0, 1},
    [TES_OPTION_PURGE_DECOMMIT] = {"purge_decommit", 1, 0, 1},
    /* Read-only: which build this is (the checks are compiled in or not). */
    [TES_OPTION_SECURE] = {"secure", TES_SECURE ? 1 : 0, TES_SECURE ? 1 : 0, TES_SECURE ? 1 : 0},
    [TES_OPTION_ABORT_ON_ERROR] = {"abort_on_error", 1, 0, 1},
    /* The hardened build's bins are out of band, popped at random
     * (internal.h, tes_sbin_t; docs/RELIABILITY.md). */
    [TES_OPTION_BINS] = {"bins", 1, 0, 1},
    [TES_OPTION_PURGE_THREAD] = {"purge_thread", 0, 0, 1},
    [TES_OPTION_HEAP_PARK] = {"heap_park", 1, 0, 1},
    /* The hardened build keeps a segment (and a guard page) a block: 0 only.
     * The default build packs since the twenty-fifth session (large.c). */
    [TES_OPTION_LARGE_PACK] = {"large_pack", TES_SECURE ? 0 : 1, 0, TES_SECURE ? 0 : 1},
};

long tes_option_values[TES_OPTION_COUNT] = {
    [TES_OPTION_SHOW_STATS] = 0,
    [TES_OPTION_VERBOSE] = 0,
    [TES_OPTION_PURGE_DELAY_MS] = 25,
    [TES_OPTION_SEGMENT_CACHE] = 64,
    [TES_OPTION_HUGE_PAGES] = 0,
    [TES_OPTION_PURGE_DECOMMIT] = 1,
    [TES_OPTION_SECURE] = TES_SECURE ? 1 : 0,
    [TES_OPTION_ABORT_ON_ERROR] = 1,
    [TES_OPTION_BINS] = 1,
    [TES_OPTION_PURGE_THREAD] = 0,
    [TES_OPTION_HEAP_PARK] = 1,
    [TES_OPTION_LARGE_PACK] = TES_SECURE ? 0 : 1,
};

/* Parse a decimal integer (blanks around it, a sign, a trailing newline
 * accepted); false on junk, emptiness or overflow. */
bool tes_options_parse_long(const char *s, long *out) {
  bool negative = false;
  while (*s == ' ' || *s == '\t') s++;
  if (*s == '-' || *s == '+') negative = *s++ == '-';
  if (*s < '0' || *s > '9') return false;
  long value = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    if (value > (__LONG_MAX__ - (*s - '0')) / 10) return false;
    value = value * 10 + (*s - '0');
  }
  while (*s == ' ' || *s == '\t' || *s == '\n') s++;
  if (*s != '\0') return false;
  *out = negative ? -value : value;
  return true;
}

/* An option's name as its variable spells it (heap_park: HEAP_PARK). */
static char upper(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c; }

/* "name=value" after "TESSERA_" when name is d's name in upper case. */
static const char *option_value(const char *entry, const tes_option_desc_t *d) {
  const char *c = d->name;
  for (; *c != '\0'; c++, entry++)
    if (*entry != upper(*c)) return NULL;
  return *entry == '=' ? entry + 1 : NULL;
}

/* One pass over the environment (the first entry of a name counts, as for
 * getenv): a getenv per option scanned it twelve times, 23,000
 * instructions at start-up with 35 variables set, an eighth of a small
 * program's whole run (PERFORMANCE.md, twenty-first session). */
void tes_options_init(void) {
  const char *text[TES_OPTION_COUNT] = {NULL};
  char *const *env = tes_os_environ();
  for (; env != NULL && *env != NULL; env++) {
    const char *rest = *env, *prefix = "TESSERA_";
    while (*prefix != '\0' && *rest == *prefix) rest++, prefix++;
    if (*prefix != '\0') continue;
    for (int i = 0; i < TES_OPTION_COUNT; i++) {
      if (text[i] != NULL) continue;
      text[i] = option_value(rest, &option_table[i]);
      if (text[i] != NULL) break;
    }
  }
  for (int i = 0; i < TES_OPTION_COUNT; i++) {
    const tes_option_desc_t *d = &option_table[i];
    tes_option_values[i] = d->default_value;
    if (text[i] == NULL) continue;
    long value;
    if (!tes_options_parse_long(text[i], &value) || value < d->min || value > d->max) {
      char var[64] = "TESSERA_";
      size_t n = 8;
      for (const char *c = d->name; *c && n < sizeof var - 1; c++)
        var[n++] = upper(*c);
      var[n] = '\0';
      tes_message("warning: ignoring %s=\"%.40s\": expected an integer in [%ld, %ld]; using the default %ld", var,
                  text[i], d->min, d->max, d->default_value);
      continue;
    }
    tes_option_values[i] = value;
  }
}

TES_API long tes_option_get(tes_option_t option) {
  if ((unsigned)option >= TES_OPTION_COUNT) return -1;
  return tes_option_values[option];
}

TES_API int tes_option_set(tes_option_t option, long value) {
  if ((unsigned)option >= TES_OPTION_COUNT) return EINVAL;
  tes_process_init();
  const tes_option_desc_t *d = &option_table[option];
  if (value < d->min || value > d->max) return EINVAL;
  tes_option_values[option] = value;
  return 0;
}

TES_API const char *tes_option_name(tes_option_t option) {
  if ((unsigned)option >= TES_OPTION_COUNT) return NULL;
  return option_table[option].name;
}
