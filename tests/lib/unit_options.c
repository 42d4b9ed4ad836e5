/* unit_options.c — the option table (src/options.c): TESSERA_<NAME> values
 * are parsed without allocating; a valid value is taken; junk, overflow and
 * out-of-range values print exactly one warning that names the variable and
 * the accepted range, and keep the default; tes_option_set range-checks. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <fcntl.h>
#include <unistd.h>

/* Run tes_options_init with stderr captured; returns the text. */
static const char *init_captured(void) {
  static char text[4096];
  char path[] = "/tmp/tessera-unit-options-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0, "mkstemp");
  unlink(path);
  int saved = dup(2);
  dup2(fd, 2);
  tes_options_init();
  dup2(saved, 2);
  close(saved);
  lseek(fd, 0, SEEK_SET);
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  text[n > 0 ? n : 0] = '\0';
  return text;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

int main(void) {
  tes_process_init();
  /* Defaults with no environment. */
  unsetenv("TESSERA_PURGE_DELAY_MS");
  unsetenv("TESSERA_SEGMENT_CACHE");
  const char *out = init_captured();
  CHECK(out[0] == '\0', "warnings without any variable: \"%s\"", out);
  long default_delay = tes_option_get(TES_OPTION_PURGE_DELAY_MS);
  CHECK(default_delay >= 10 && default_delay <= 100, "purge delay default %ld outside 10..100 ms", default_delay);

  /* Valid values, with surrounding blanks. */
  setenv("TESSERA_PURGE_DELAY_MS", " 250 ", 1);
  setenv("TESSERA_SEGMENT_CACHE", "3", 1);
  out = init_captured();
  CHECK(out[0] == '\0', "warning for valid values: \"%s\"", out);
  CHECK(tes_option_get(TES_OPTION_PURGE_DELAY_MS) == 250, "purge_delay_ms %ld", tes_option_get(TES_OPTION_PURGE_DELAY_MS));
  CHECK(tes_option_get(TES_OPTION_SEGMENT_CACHE) == 3, "segment_cache %ld", tes_option_get(TES_OPTION_SEGMENT_CACHE));

  /* Invalid values: one warning each, naming the variable and the range. */
  const char *bad[] = {"abc", "-1", "12ms", "99999999999999999999999", "", "3600001"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("TESSERA_PURGE_DELAY_MS", bad[i], 1);
    unsetenv("TESSERA_SEGMENT_CACHE");
    out = init_captured();
    CHECK(count_lines(out) == 1, "value \"%s\": %d lines of warning: \"%s\"", bad[i], count_lines(out), out);
    CHECK(strstr(out, "TESSERA_PURGE_DELAY_MS") && strstr(out, "[0, 3600000]"),
          "value \"%s\": warning lacks the variable or the range: \"%s\"", bad[i], out);
    CHECK(tes_option_get(TES_OPTION_PURGE_DELAY_MS) == default_delay, "value \"%s\" changed the option to %ld",
          bad[i], tes_option_get(TES_OPTION_PURGE_DELAY_MS));
  }
  setenv("TESSERA_SHOW_STATS", "2", 1);
  unsetenv("TESSERA_PURGE_DELAY_MS");
  out = init_captured();
  CHECK(strstr(out, "TESSERA_SHOW_STATS") && strstr(out, "[0, 1]"), "show_stats=2: \"%s\"", out);
  unsetenv("TESSERA_SHOW_STATS");
  init_captured();

  /* The one pass over environ (options.c) answers as getenv would: the
   * first entry of a name counts, an entry without '=' or with a longer
   * name (TESSERA_BINSX) is no entry of the option, nor is one of another
   * case; no environment at all leaves the defaults. */
  {
    extern char **environ;
    char **saved = environ;
    char *entries[] = {"TESSERA_SEGMENT_CACHE",       "TESSERA_BINSX=0",          "TESSERA_BIN=0",
                       "tessera_purge_delay_ms=7",    "TESSERA_SEGMENT_CACHE=5",  "TESSERA_PURGE_DELAY_MSX=9",
                       "TESSERA_SEGMENT_CACHE=6",     "TESSERA_=1",               "TESSERA",
                       "TESSERA_PURGE_DELAY_MS=40",   "TESSERA_PURGE_DELAY_MS=41", "=TESSERA_BINS=0",
                       "TESSERA_PURGE_DECOMMIT=0",    NULL};
    environ = entries;
    const char *want_cache = getenv("TESSERA_SEGMENT_CACHE"), *want_delay = getenv("TESSERA_PURGE_DELAY_MS");
    out = init_captured();
    environ = saved;
    CHECK(out[0] == '\0', "warnings for the edge-case environment: \"%s\"", out);
    CHECK(want_cache != NULL && strcmp(want_cache, "5") == 0 && want_delay != NULL && strcmp(want_delay, "40") == 0,
          "getenv's own answers changed (test setup)");
    CHECK(tes_option_get(TES_OPTION_SEGMENT_CACHE) == 5, "segment_cache %ld, getenv says 5",
          tes_option_get(TES_OPTION_SEGMENT_CACHE));
    CHECK(tes_option_get(TES_OPTION_PURGE_DELAY_MS) == 40, "purge_delay_ms %ld, getenv says 40",
          tes_option_get(TES_OPTION_PURGE_DELAY_MS));
    CHECK(tes_option_get(TES_OPTION_BINS) == 1, "bins %ld from TESSERA_BINSX/TESSERA_BIN", tes_option_get(TES_OPTION_BINS));
    CHECK(tes_option_get(TES_OPTION_PURGE_DECOMMIT) == 0, "purge_decommit %ld after the odd entries",
          tes_option_get(TES_OPTION_PURGE_DECOMMIT));
    char *none[] = {NULL};
    environ = none;
    out = init_captured();
    CHECK(out[0] == '\0', "warnings with an empty environment: \"%s\"", out);
    environ = NULL;
    out = init_captured();
    environ = saved;
    CHECK(out[0] == '\0', "warnings with no environment: \"%s\"", out);
    CHECK(tes_option_get(TES_OPTION_PURGE_DELAY_MS) == default_delay && tes_option_get(TES_OPTION_PURGE_DECOMMIT) == 1,
          "no environment: not the defaults");
    init_captured();
  }

  /* The run-time setter. */
  CHECK(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 0) == 0 && tes_option_get(TES_OPTION_PURGE_DELAY_MS) == 0,
        "purge delay 0 refused");
  CHECK(tes_option_set(TES_OPTION_PURGE_DELAY_MS, -5) == EINVAL, "negative delay accepted");
  CHECK(tes_option_set(TES_OPTION_COUNT, 1) == EINVAL, "out-of-range option accepted");
  CHECK(strcmp(tes_option_name(TES_OPTION_SEGMENT_CACHE), "segment_cache") == 0, "option name");
  CHECK(tes_option_name(TES_OPTION_COUNT) == NULL, "name of an out-of-range option");
  /* With purge delay 0 an emptied page is purged at once. */
  void *blocks[2000];
  for (int i = 0; i < 2000; i++) blocks[i] = tes_malloc(1000);
  tes_stats_t s0, s1;
  tes_stats_get(&s0);
  for (int i = 0; i < 2000; i++) tes_free(blocks[i]);
  tes_stats_get(&s1);
  CHECK(s1.os_purged_bytes > s0.os_purged_bytes, "purge delay 0: nothing purged on free");
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, default_delay);
  return unit_finish("unit_options");
}
