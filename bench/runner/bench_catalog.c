/* The workload catalog and allocator registry (see bench_catalog.h).
 * Adding a workload is adding one line to bench_workloads[] and one program
 * to bench/CMakeLists.txt. The order of the table is the order of the
 * report's rows. */
#include "bench_catalog.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const bench_workload_t bench_workloads[] = {
  /* The seed allocator's six rows. */
  {"single", "seed", "bench_single", NULL, BENCH_SRC_OWN, BENCH_THREADS_NONE, 0, 0,
   "malloc+free of one small block in a tight loop (8 sizes, 16-256 B)"},
  {"batch-alloc", "seed", "bench_batch", "alloc", BENCH_SRC_OWN, BENCH_THREADS_NONE, 0, 0,
   "allocate 20,000 blocks of 16-256 B (time of the allocation phases)"},
  {"batch-free", "seed", "bench_batch", "free", BENCH_SRC_OWN, BENCH_THREADS_NONE, 0, 0,
   "free 20,000 blocks of 16-256 B in allocation order (time of the free phases)"},
  {"mixed", "seed", "bench_mixed", NULL, BENCH_SRC_OWN, BENCH_THREADS_NONE, 0, 0,
   "random replacement in a 400-slot pool, sizes 8 B-1 MiB log-uniform"},
  {"realloc", "seed", "bench_realloc", NULL, BENCH_SRC_OWN, BENCH_THREADS_NONE, 0, 0,
   "4 interleaved buffers grown by realloc in 8-64 B steps to 64 KiB"},
  {"threads", "seed", "bench_threads", NULL, BENCH_SRC_OWN, BENCH_THREADS_SCALED, 0, 0,
   "N threads allocating and freeing their own batches of 64 blocks (fixed total work)"},
  /* The fit-policy workloads of the compat part, on the real malloc. */
  {"cpe357", "fit", "fit_cpe357", NULL, BENCH_SRC_FIT, BENCH_THREADS_NONE, 0, 60000,
   "CPE 357 pattern: 100 x malloc(1000), free 90, free/re-malloc one, free the rest"},
  {"fit-equal", "fit", "fit_equal", NULL, BENCH_SRC_FIT, BENCH_THREADS_NONE, 0, 1500,
   "fit experiment: equal-size 128 B items interleaved with spacers"},
  {"fit-small", "fit", "fit_small_range", NULL, BENCH_SRC_FIT, BENCH_THREADS_NONE, 0, 600,
   "fit experiment: small-range random sizes 32 x U[4,16] B"},
  {"fit-large", "fit", "fit_large_range", NULL, BENCH_SRC_FIT, BENCH_THREADS_NONE, 0, 30,
   "fit experiment: large-range random sizes 32 x U[1,2048] B"},
  /* malloc-lab traces through the real malloc (one row per trace set). */
  {"traces", "traces", "bench_traces", NULL, BENCH_SRC_TRACES, BENCH_THREADS_NONE, 0, 0,
   "replay of malloc-lab traces (../shared/traces sets) through malloc/free/realloc"},
  /* Multi-threaded stressors. */
  {"prodcons", "mt", "bench_prodcons", NULL, BENCH_SRC_OWN, BENCH_THREADS_SCALED, 0, 0,
   "producer threads allocate, consumer threads free (every free is remote)"},
  {"larson", "mt", "bench_larson", NULL, BENCH_SRC_OWN, BENCH_THREADS_SCALED, 0, 0,
   "larson-style server: threads replace random blocks, successors inherit them"},
  {"cache-scratch", "mt", "bench_cache", "scratch", BENCH_SRC_OWN, BENCH_THREADS_CORES, 0, 0,
   "passive false sharing: threads free a neighbour's block, then write their own"},
  {"cache-thrash", "mt", "bench_cache", "thrash", BENCH_SRC_OWN, BENCH_THREADS_CORES, 0, 0,
   "active false sharing: threads write small blocks they allocated concurrently"},
  {"mstress", "mt", "bench_mstress", NULL, BENCH_SRC_OWN, BENCH_THREADS_SCALED, 0, 0,
   "random lifetimes and object migration through a shared table, thread churn"},
  /* Memory shape. */
  {"aligned", "memory", "bench_aligned", NULL, BENCH_SRC_OWN, BENCH_THREADS_NONE, 0, 0,
   "posix_memalign/aligned_alloc with alignments 16 B-1 MiB, every result checked"},
  {"footprint", "memory", "bench_footprint", NULL, BENCH_SRC_OWN, BENCH_THREADS_NONE, 1, 0,
   "5 phases of shifting size mixes; RSS over time (is memory given back?)"},
  /* Real programs, when installed. */
  {"redis", "real", "bench_redis", NULL, BENCH_SRC_OWN, BENCH_THREADS_NONE, 0, 0,
   "redis-server on a private unix socket, redis-benchmark with a bounded request count"},
  {"sqlite", "real", "bench_sqlite", NULL, BENCH_SRC_OWN, BENCH_THREADS_NONE, 0, 0,
   "sqlite3 shell on a generated in-memory database (insert, index, aggregate, update)"},
  {"python", "real", "bench_python", NULL, BENCH_SRC_OWN, BENCH_THREADS_NONE, 0, 0,
   "python3 allocation-heavy script (dicts, strings, JSON) with PYTHONMALLOC=malloc"},
  {"clang", "real", "bench_clang", NULL, BENCH_SRC_OWN, BENCH_THREADS_NONE, 0, 0,
   "clang-14 -S -O1 on a generated C++20 unit (templates, constexpr containers, virtual classes)"},
  {"startup", "real", "bench_startup", NULL, BENCH_SRC_OWN, BENCH_THREADS_NONE, 0, 0,
   "short-lived programs: malloc(16), true, sort, ls -l, exec'd in turn (peak RSS: the largest)"},
};
const size_t bench_workload_count = sizeof bench_workloads / sizeof bench_workloads[0];

const bench_workload_t *bench_find_workload(const char *name) {
  for (size_t i = 0; i < bench_workload_count; i++)
    if (!strcmp(bench_workloads[i].name, name)) return &bench_workloads[i];
  return NULL;
}

const char *bench_source_dir(void) {
  const char *env = getenv("TESSERA_SOURCE_DIR");
  return env && *env ? env : TESSERA_SOURCE_DIR;
}

static int is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The Debian peers; the first existing candidate path wins. */
typedef struct peer_s {
  const char *name;
  const char *install_hint;
  const char *candidates[4];
} peer_t;

static const peer_t peers[] = {
  {"jemalloc", "apt-get install libjemalloc2",
   {"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
    "/usr/lib64/libjemalloc.so.2", "/usr/local/lib/libjemalloc.so.2"}},
  {"tcmalloc", "apt-get install libtcmalloc-minimal4",
   {"/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib64/libtcmalloc_minimal.so.4", "/usr/local/lib/libtcmalloc_minimal.so.4"}},
  {"mimalloc", "apt-get install libmimalloc2.0",
   {"/usr/lib/x86_64-linux-gnu/libmimalloc.so.2", "/usr/lib/aarch64-linux-gnu/libmimalloc.so.2",
    "/usr/lib64/libmimalloc.so.2", "/usr/local/lib/libmimalloc.so.2"}},
};

size_t bench_known_allocators(const char *bin_dir, bench_allocator_t *out, size_t max) {
  size_t n = 0;
  if (n < max) {
    memset(&out[n], 0, sizeof out[n]);
    snprintf(out[n].name, sizeof out[n].name, "system");
    out[n].available = 1;
    n++;
  }
  if (n < max) {
    memset(&out[n], 0, sizeof out[n]);
    snprintf(out[n].name, sizeof out[n].name, "tessera");
    snprintf(out[n].path, sizeof out[n].path, "%s/libtessera.so", bin_dir);
    out[n].install_hint = "build it first: cmake --build <build dir> (libtessera.so not built yet)";
    out[n].available = is_file(out[n].path);
    n++;
  }
  for (size_t p = 0; p < sizeof peers / sizeof peers[0] && n < max; p++) {
    memset(&out[n], 0, sizeof out[n]);
    snprintf(out[n].name, sizeof out[n].name, "%s", peers[p].name);
    out[n].install_hint = peers[p].install_hint;
    snprintf(out[n].path, sizeof out[n].path, "%s", peers[p].candidates[0]);
    for (int c = 0; c < 4 && peers[p].candidates[c]; c++)
      if (is_file(peers[p].candidates[c])) {
        snprintf(out[n].path, sizeof out[n].path, "%s", peers[p].candidates[c]);
        out[n].available = 1;
        break;
      }
    n++;
  }
  return n;
}

int bench_workload_program(const char *bin_dir, const bench_workload_t *w, char *path, size_t len) {
  static const char *const subdirs[] = {"/bench", "/bench/fit", ""};
  for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
    snprintf(path, len, "%s%s/%s", bin_dir, subdirs[i], w->program);
    if (is_file(path) && access(path, X_OK) == 0) return 1;
  }
  return 0;
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append a copy of s to the growing array *list; false when out of memory. */
static bool push_copy(char ***list, size_t *n, size_t *cap, const char *s) {
  if (*n == *cap) {
    size_t grown_cap = *cap ? 2 * *cap : 64;
    char **grown = realloc(*list, grown_cap * sizeof *grown);
    if (!grown) return false;
    *list = grown;
    *cap = grown_cap;
  }
  if (((*list)[*n] = strdup(s)) == NULL) return false;
  (*n)++;
  return true;
}

size_t bench_trace_files(const char *dir, char **files, size_t max, size_t *total) {
  if (total) *total = 0;
  DIR *d = opendir(dir);
  if (!d) return 0;
  /* All of them first, then the first max by name: stopping the directory
   * scan at max kept an arbitrary subset (readdir order) of a larger set. */
  char **all = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".rep")) continue;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path || !is_file(path)) continue;
    if (!push_copy(&all, &n, &cap, path)) break;
  }
  closedir(d);
  if (n) qsort(all, n, sizeof *all, compare_strings);
  size_t kept = n < max ? n : max;
  for (size_t i = 0; i < n; i++) {
    if (i < kept) files[i] = all[i];
    else free(all[i]);
  }
  free(all);
  if (total) *total = n;
  return kept;
}

const char *bench_traces_root(void) {
  static char root[PATH_MAX];
  const char *env = getenv("TESSERA_TRACES_DIR");
  if (env && *env) snprintf(root, sizeof root, "%s", env);
  else snprintf(root, sizeof root, "%s/../shared/traces", bench_source_dir());
  return root;
}

size_t bench_trace_sets(char dirs[][PATH_MAX], size_t max) {
  const char *root = bench_traces_root();
  DIR *d = opendir(root);
  if (!d) return 0;
  /* Every set, then the first max by name (as for the files of a set:
   * stopping the scan early kept an arbitrary subset). */
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", root, e->d_name) >= (int)sizeof path) continue;
    char *files[1];
    size_t has = bench_trace_files(path, files, 1, NULL);
    if (!has) continue;
    free(files[0]);
    if (!push_copy(&names, &n, &cap, e->d_name)) break;
  }
  closedir(d);
  qsort(names, n, sizeof *names, compare_strings);
  size_t out = 0;
  for (size_t i = 0; i < n; i++) {
    if (out < max && snprintf(dirs[out], PATH_MAX, "%s/%s", root, names[i]) < PATH_MAX) out++;
    free(names[i]);
  }
  free(names);
  return out;
}
