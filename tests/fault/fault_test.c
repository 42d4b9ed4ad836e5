/* fault_test.c — fault injection at every call site where libtessera asks the
 * OS for memory and the OS can say no.
 *
 * Each check runs in its own process (`fault_test NAME`, CTest `fault.NAME`)
 * so it starts from a fresh allocator: "the first mmap of a segment" really is
 * the first. A check makes the OS layer fail through the test hook in
 * src/fault.h (linked from the tessera_fault library) and asserts the three
 * promises of the contract (include/tessera.h):
 *   1. the call returns NULL with errno == ENOMEM (posix_memalign: returns
 *      ENOMEM),
 *   2. every block allocated before still holds its contents (each is filled
 *      with a seeded pattern and re-read),
 *   3. after tes_fault_clear() the allocator works normally again.
 * Every check also asserts that the hook really fired (tes_fault_injected()
 * grew), so a check cannot pass by never reaching its site.
 *
 * Blocks are tracked in static arrays, never in heap memory: whichever malloc
 * the test binary ends up with, the bookkeeping cannot fail under a fault. */
#define _GNU_SOURCE
#include "fault_common.h"

#include "fault.h"
#include "tessera.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* ---- A pool of live blocks ------------------------------------------------ */
#define POOL_CAPACITY 300000
static fault_block_t pool[POOL_CAPACITY];
static size_t pool_count;
static uint32_t next_seed = 1;

static fault_block_t *pool_add(void *ptr, size_t size) {
  CHECK(pool_count < POOL_CAPACITY);
  fault_block_t *b = &pool[pool_count++];
  b->ptr = ptr;
  b->size = size;
  b->seed = next_seed++;
  fault_fill(b);
  return b;
}

static void pool_verify(void) {
  for (size_t i = 0; i < pool_count; i++) {
    if (!fault_intact(&pool[i])) {
      fprintf(stderr, "block %zu (%p, %zu bytes) lost its contents\n", i,
              (void *)pool[i].ptr, pool[i].size);
      exit(1);
    }
  }
}

static void pool_free_all(void) {
  pool_verify();
  for (size_t i = 0; i < pool_count; i++) tes_free(pool[i].ptr);
  pool_count = 0;
}

/* ---- Allocation kinds ---------------------------------------------------- */
/* Every API entry that can need fresh memory, behind one signature, so the
 * same "exhaust under fault" routine covers each of them. */
typedef enum alloc_kind_e {
  KIND_MALLOC, KIND_CALLOC, KIND_ALIGNED_ALLOC, KIND_POSIX_MEMALIGN,
  KIND_MEMALIGN, KIND_VALLOC, KIND_PVALLOC, KIND_REALLOCARRAY_NEW,
} alloc_kind_t;

static const char *kind_name(alloc_kind_t kind) {
  static const char *names[] = {"malloc", "calloc", "aligned_alloc", "posix_memalign",
                                "memalign", "valloc", "pvalloc", "reallocarray"};
  return names[kind];
}

/* Allocate `size` bytes with `kind`; on failure return NULL and leave the
 * error code in errno (posix_memalign's return value is moved there). */
static void *alloc_with(alloc_kind_t kind, size_t alignment, size_t size) {
  switch (kind) {
    case KIND_MALLOC: return tes_malloc(size);
    case KIND_CALLOC: {
      unsigned char *p = tes_calloc(1, size);
      if (p)
        for (size_t i = 0; i < size; i++) CHECK(p[i] == 0);
      return p;
    }
    case KIND_ALIGNED_ALLOC: return tes_aligned_alloc(alignment, size);
    case KIND_POSIX_MEMALIGN: {
      void *out = NULL;
      int rc = tes_posix_memalign(&out, alignment, size);
      if (rc != 0) {
        errno = rc;
        return NULL;
      }
      return out;
    }
    case KIND_MEMALIGN: return tes_memalign(alignment, size);
    case KIND_VALLOC: return tes_valloc(size);
    case KIND_PVALLOC: return tes_pvalloc(size);
    case KIND_REALLOCARRAY_NEW: return tes_reallocarray(NULL, 1, size);
  }
  return NULL;
}

/* Under an mmap fault that is always on, allocate blocks of `size` with
 * `kind` until one fails (it must, within `budget` bytes); assert ENOMEM and
 * that everything allocated before is intact. Returns how many succeeded. */
static size_t exhaust(alloc_kind_t kind, size_t alignment, size_t size, size_t budget) {
  size_t got = 0;
  for (size_t spent = 0; spent <= budget; spent += size) {
    errno = 0;
    void *p = alloc_with(kind, alignment, size);
    if (p == NULL) {
      if (errno != ENOMEM) {
        fprintf(stderr, "%s(%zu) under fault: NULL with errno %d, want ENOMEM\n",
                kind_name(kind), size, errno);
        exit(1);
      }
      pool_verify();
      return got;
    }
    if (alignment) CHECK(((uintptr_t)p & (alignment - 1)) == 0);
    pool_add(p, size);
    got++;
  }
  fprintf(stderr, "%s(%zu): still succeeding after %zu bytes with every mmap failing\n",
          kind_name(kind), size, budget);
  exit(1);
}

/* After tes_fault_clear(): the allocator must serve the same request again,
 * and plenty more, and everything must still be intact. */
static void works_after_clear(alloc_kind_t kind, size_t alignment, size_t size, int count) {
  tes_fault_clear();
  for (int i = 0; i < count; i++) {
    errno = 0;
    void *p = alloc_with(kind, alignment, size);
    if (p == NULL) {
      fprintf(stderr, "%s(%zu) fails after tes_fault_clear (errno %d)\n", kind_name(kind),
              size, errno);
      exit(1);
    }
    if (alignment) CHECK(((uintptr_t)p & (alignment - 1)) == 0);
    pool_add(p, size);
  }
  pool_verify();
}

static uint64_t injected_before;
static void expect_injected(void) { CHECK(tes_fault_injected() > injected_before); }

/* ---- The checks ------------------------------------------------------------- */

/* The very first allocation of the process has no segment to use: the first
 * segment mmap fails, the call must return NULL/ENOMEM, and the next call
 * after the fault clears must map it. */
static void check_first_segment(void) {
  injected_before = tes_fault_injected();
  tes_fault_fail_always(TES_FAULT_MMAP, true);
  errno = 0;
  void *p = tes_malloc(48);
  CHECK(p == NULL && errno == ENOMEM);
  errno = 0;
  p = tes_calloc(3, 16);
  CHECK(p == NULL && errno == ENOMEM);
  expect_injected();
  works_after_clear(KIND_MALLOC, 0, 48, 1000);
  pool_free_all();
}

/* Small blocks fill the first segments; then every further mmap fails. The
 * allocator must keep serving from what it has, then fail cleanly. */
static void check_segment_growth(void) {
  static const size_t sizes[] = {16, 48, 128, 512, 1024, 4000};
  for (size_t round = 0; round < 6; round++)
    for (int i = 0; i < 2000; i++) pool_add(tes_malloc(sizes[round]), sizes[round]);
  injected_before = tes_fault_injected();
  tes_fault_fail_always(TES_FAULT_MMAP, true);
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    exhaust(KIND_MALLOC, 0, sizes[s], 512 * MiB);
  expect_injected();
  /* A failed malloc is no fast-path miss: counted as one, it also took one
   * off the hits (the small allocations made less the misses), which
   * wrapped below zero once the failures outnumbered them. */
  static tes_stats_t before, after; /* static: large */
  tes_stats_get(&before);
  for (int i = 0; i < 1000; i++) {
    errno = 0;
    CHECK(tes_malloc(16) == NULL && errno == ENOMEM);
  }
  tes_stats_get(&after);
  CHECK(after.fast_path_misses == before.fast_path_misses && after.fast_path_hits == before.fast_path_hits);
  CHECK(after.failed_calls >= before.failed_calls + 1000);
  works_after_clear(KIND_MALLOC, 0, 1024, 5000);
  pool_free_all();
  /* Everything freed: the allocator is still healthy. */
  works_after_clear(KIND_MALLOC, 0, 96, 1000);
  pool_free_all();
}

/* Segment growth where only the n-th mmap from now fails, for every n up to
 * 40, during a mixed workload: whichever call meets the failure returns
 * NULL/ENOMEM and nothing else is disturbed. */
static void check_nth_mmap_sweep(void) {
  uint64_t nulls = 0;
  uint32_t rng = 12345;
  for (long n = 1; n <= 40; n++) {
    tes_fault_fail_nth(TES_FAULT_MMAP, n);
    for (int op = 0; op < 200; op++) {
      rng = rng * 1103515245u + 12345u;
      unsigned pick = (rng >> 16) % 32;
      size_t size = pick < 24 ? 16 + (rng >> 8) % 2048
                  : pick < 31 ? 8 * KiB + (rng >> 4) % (128 * KiB)
                              : 1 * MiB + (rng >> 4) % (3 * MiB);
      alloc_kind_t kind = (alloc_kind_t)((rng >> 12) % 3); /* malloc, calloc, aligned */
      size_t alignment = kind == KIND_ALIGNED_ALLOC ? (size_t)64 << ((rng >> 20) % 12) : 0;
      if (alignment) size = (size + alignment - 1) & ~(alignment - 1);
      errno = 0;
      void *p = alloc_with(kind, alignment, size);
      if (p == NULL) {
        CHECK(errno == ENOMEM);
        nulls++;
        continue;
      }
      pool_add(p, size);
    }
    pool_verify();
    /* Free half so later rounds reuse and re-map memory. */
    for (size_t i = 0; i < pool_count; i += 2) tes_free(pool[i].ptr);
    size_t kept = 0;
    for (size_t i = 1; i < pool_count; i += 2) pool[kept++] = pool[i];
    pool_count = kept;
  }
  CHECK(nulls > 0); /* the sweep really met injected failures */
  works_after_clear(KIND_MALLOC, 0, 3 * MiB, 4);
  pool_free_all();
}

/* Large and huge blocks get their own mapping: make every mapping above
 * 1 MiB fail. */
static void check_large_mmap(void) {
  for (int i = 0; i < 200; i++) pool_add(tes_malloc(256), 256);
  fault_block_t *small = &pool[0];
  injected_before = tes_fault_injected();
  tes_fault_fail_above(TES_FAULT_MMAP, 1 * MiB);
  static const size_t sizes[] = {2 * MiB, 32 * MiB, 1024 * MiB};
  for (size_t s = 0; s < 3; s++) {
    errno = 0;
    CHECK(tes_malloc(sizes[s]) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(tes_calloc(sizes[s] / 16, 16) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(tes_realloc(small->ptr, sizes[s]) == NULL && errno == ENOMEM);
  }
  CHECK(fault_intact(small));
  expect_injected();
  pool_verify();
  works_after_clear(KIND_MALLOC, 0, 32 * MiB, 3);
  works_after_clear(KIND_CALLOC, 0, 8 * MiB, 2);
  pool_free_all();
}

/* Growing a huge block uses mremap. With mremap failing the allocator may
 * still move the block by mmap+copy; with both failing it must return NULL
 * and leave the block untouched. */
static void check_huge_realloc_mremap(void) {
  fault_block_t *b = pool_add(tes_malloc(16 * MiB), 16 * MiB);
  injected_before = tes_fault_injected();
  tes_fault_fail_always(TES_FAULT_MREMAP, true);
  errno = 0;
  void *q = tes_realloc(b->ptr, 64 * MiB);
  if (q == NULL) {
    CHECK(errno == ENOMEM);
    CHECK(fault_intact(b));
  } else {
    b->ptr = q;
    CHECK(fault_intact(b)); /* the first 16 MiB moved with the block */
    memset(b->ptr + b->size, 0x5a, 64 * MiB - b->size);
  }
  tes_fault_fail_always(TES_FAULT_MMAP, true);
  errno = 0;
  CHECK(tes_realloc(b->ptr, 512 * MiB) == NULL && errno == ENOMEM);
  CHECK(fault_intact(b));
  expect_injected();
  /* Shrinking may not need the OS at all; if it does and fails, the block
   * must still be whole. */
  errno = 0;
  q = tes_realloc(b->ptr, 12 * MiB);
  if (q == NULL) {
    CHECK(errno == ENOMEM);
    CHECK(fault_intact(b));
  } else {
    b->ptr = q;
    b->size = 12 * MiB;
    CHECK(fault_intact(b));
  }
  tes_fault_clear();
  q = tes_realloc(b->ptr, 96 * MiB);
  CHECK(q != NULL);
  b->ptr = q;
  CHECK(fault_intact(b));
  b->size = 96 * MiB;
  fault_fill(b);
  pool_free_all();
}

/* Purging free pages calls madvise. A failed madvise must not make the
 * allocator believe the pages are zero: calloc after a failed purge still
 * returns zeroed memory, and live neighbours are untouched. */
static void check_madvise_purge(void) {
  enum { BLOCKS = 4096 };
  static void *dirty[BLOCKS];
  const size_t size = 2 * KiB; /* 8 MiB of small blocks, spanning many pages */
  for (int i = 0; i < BLOCKS; i++) {
    dirty[i] = tes_malloc(size);
    CHECK(dirty[i] != NULL);
    memset(dirty[i], 0xA5, size);
    if (i % 512 == 0) pool_add(tes_malloc(size), size); /* keeps segments alive */
  }
  void *large = tes_malloc(24 * MiB);
  CHECK(large != NULL);
  memset(large, 0xA5, 24 * MiB);
  for (int i = 0; i < BLOCKS; i++) tes_free(dirty[i]);
  tes_free(large);
  injected_before = tes_fault_injected();
  tes_fault_fail_always(TES_FAULT_MADVISE, true);
  tes_collect(true);
  expect_injected();
  pool_verify();
  /* The memory purge could not release is reused, and calloc zeroes it. */
  for (int i = 0; i < BLOCKS; i++) {
    unsigned char *p = tes_calloc(1, size);
    CHECK(p != NULL);
    for (size_t j = 0; j < size; j++) CHECK(p[j] == 0);
    dirty[i] = p;
  }
  unsigned char *big = tes_calloc(1, 24 * MiB);
  CHECK(big != NULL);
  for (size_t j = 0; j < 24 * MiB; j += 97) CHECK(big[j] == 0);
  for (int i = 0; i < BLOCKS; i++) tes_free(dirty[i]);
  tes_free(big);
  tes_collect(true);
  pool_verify();
  works_after_clear(KIND_CALLOC, 0, size, 1000);
  tes_collect(true); /* with madvise working again */
  pool_free_all();
}

/* Every aligned entry point, at alignments that fit in a segment and at ones
 * that need a dedicated mapping, with every mmap failing. */
static void check_aligned_paths(void) {
  static const alloc_kind_t kinds[] = {KIND_ALIGNED_ALLOC, KIND_POSIX_MEMALIGN, KIND_MEMALIGN};
  static const size_t alignments[] = {64, 4 * KiB, 1 * MiB, TES_MAX_ALIGNMENT};
  /* Some memory first, so small alignments are served from existing pages
   * before they need a new segment. */
  for (int i = 0; i < 1000; i++) pool_add(tes_malloc(100 + (size_t)i), 100 + (size_t)i);
  injected_before = tes_fault_injected();
  tes_fault_fail_always(TES_FAULT_MMAP, true);
  for (size_t k = 0; k < 3; k++) {
    for (size_t a = 0; a < 4; a++) {
      size_t size = alignments[a] < 64 * KiB ? alignments[a] * 2 : 128;
      exhaust(kinds[k], alignments[a], size, 256 * MiB);
    }
  }
  exhaust(KIND_VALLOC, 4 * KiB, 8 * KiB, 256 * MiB);
  exhaust(KIND_PVALLOC, 4 * KiB, 3 * MiB, 256 * MiB);
  expect_injected();
  for (size_t k = 0; k < 3; k++)
    for (size_t a = 0; a < 4; a++) works_after_clear(kinds[k], alignments[a], 128, 2);
  works_after_clear(KIND_VALLOC, 4 * KiB, 100, 10);
  works_after_clear(KIND_PVALLOC, 4 * KiB, 100, 10);
  pool_free_all();
}

/* calloc, small and large, and reallocarray of NULL, under every mmap
 * failing; calloc of previously used memory is zero after the fault. */
static void check_calloc(void) {
  for (int i = 0; i < 1000; i++) pool_add(tes_malloc(200), 200);
  for (int i = 0; i < 1000; i += 2) tes_free(pool[i].ptr); /* dirty free blocks */
  size_t kept = 0;
  for (size_t i = 1; i < pool_count; i += 2) pool[kept++] = pool[i];
  pool_count = kept;
  injected_before = tes_fault_injected();
  tes_fault_fail_always(TES_FAULT_MMAP, true);
  exhaust(KIND_CALLOC, 0, 200, 256 * MiB); /* reuses the dirty blocks, then fails */
  exhaust(KIND_CALLOC, 0, 16 * MiB, 256 * MiB);
  exhaust(KIND_REALLOCARRAY_NEW, 0, 300, 256 * MiB);
  errno = 0;
  CHECK(tes_calloc((size_t)1 << 20, (size_t)1 << 12) == NULL && errno == ENOMEM);
  expect_injected();
  works_after_clear(KIND_CALLOC, 0, 200, 500);
  works_after_clear(KIND_CALLOC, 0, 16 * MiB, 2);
  pool_free_all();
}

/* realloc that has to move (to a larger class, to a large block) with every
 * mmap failing: NULL/ENOMEM and the old block intact, at each step. */
static void check_realloc_move(void) {
  static const size_t steps[] = {100, 1000, 20 * KiB, 300 * KiB, 3 * MiB, 48 * MiB};
  enum { N = 24 };
  for (int i = 0; i < N; i++) pool_add(tes_malloc(steps[0]), steps[0]);
  /* Fill the small pages so growth needs a fresh segment. */
  for (int i = 0; i < 20000; i++) pool_add(tes_malloc(1000), 1000);
  injected_before = tes_fault_injected();
  tes_fault_fail_always(TES_FAULT_MMAP, true);
  int failures = 0;
  for (int i = 0; i < N; i++) {
    fault_block_t *b = &pool[i];
    for (size_t s = 1; s < sizeof steps / sizeof steps[0]; s++) {
      errno = 0;
      unsigned char *q = tes_realloc(b->ptr, steps[s]);
      if (q == NULL) {
        CHECK(errno == ENOMEM);
        CHECK(fault_intact(b));
        failures++;
        break;
      }
      b->ptr = q;
      CHECK(fault_intact(b)); /* old contents moved along */
      b->size = steps[s];
      fault_fill(b);
    }
  }
  CHECK(failures == N); /* 48 MiB can never be had without mmap */
  expect_injected();
  pool_verify();
  tes_fault_clear();
  for (int i = 0; i < N; i++) {
    fault_block_t *b = &pool[i];
    unsigned char *q = tes_realloc(b->ptr, 4 * MiB + (size_t)i);
    CHECK(q != NULL);
    b->ptr = q;
    CHECK(fault_intact(b));
    b->size = 4 * MiB + (size_t)i;
    fault_fill(b);
  }
  pool_free_all();
}

/* The mapping holding addr (/proc/self/maps): its end, and whether it is
 * PROT_NONE. 0 when addr is not mapped. Called with no fault programmed
 * (fopen allocates). */
static uintptr_t mapping_end(uintptr_t addr, bool *none) {
  static char text[1 << 20];
  FILE *f = fopen("/proc/self/maps", "r");
  CHECK(f != NULL);
  size_t len = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[len] = '\0';
  for (char *line = text; *line != '\0';) {
    unsigned long start, end;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3 && start <= addr && addr < end) {
      *none = strncmp(perms, "---", 3) == 0;
      return end;
    }
    char *next = strchr(line, '\n');
    if (next == NULL) break;
    line = next + 1;
  }
  return 0;
}

/* realloc past a large block's mapping grows the mapping with mremap: the
 * default build's tes_os_remap, the hardened build's tes_os_remap_guarded,
 * which moves the segment's pieces (header, header guard, block) one
 * mremap each and puts back those that moved when a later one fails. The
 * space after the segment is taken first (a page mapped there), so it must
 * move; then the n-th mremap from the realloc fails, n = 1..6: whichever
 * fails (the in-place try, the block's move, a header piece's, or none),
 * realloc succeeds (moved, or copied when the remap gave up) with errno
 * untouched, the contents kept and, in the hardened build, a guard page
 * right after the block. Then mremap and mmap both fail: NULL, ENOMEM, the
 * block whole. */
static void check_guarded_remap(void) {
  /* A segment a block: a packed 300 KiB block (the default build's default
   * since the twenty-fifth session) grows by a copy, never by mremap. */
  CHECK(tes_option_set(TES_OPTION_LARGE_PACK, 0) == 0);
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  void *probe = tes_malloc(100);
  bool secure = tes_usable_size(probe) == 100; /* the hardened build's usable size is the request */
  tes_free(probe);
  injected_before = tes_fault_injected();
  for (long n = 1; n <= 6; n++) {
    fault_block_t *b = pool_add(tes_malloc(300 * KiB), 300 * KiB);
    bool none;
    uintptr_t end = mapping_end(((uintptr_t)b->ptr + b->size + 16 + page - 1) & ~(page - 1), &none);
    CHECK(end != 0);
    void *blocker = mmap((void *)end, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(blocker == (void *)end || errno == EEXIST);
    tes_fault_fail_nth(TES_FAULT_MREMAP, n);
    errno = 4321;
    unsigned char *q = tes_realloc(b->ptr, 9 * MiB);
    CHECK(q != NULL && errno == 4321);
    tes_fault_clear();
    b->ptr = q;
    CHECK(fault_intact(b));
    if (secure) {
      CHECK(mapping_end(((uintptr_t)q + 9 * MiB + 16 + page - 1) & ~(page - 1), &none) != 0 && none);
      CHECK(mapping_end((uintptr_t)q, &none) != 0 && !none);
    }
    b->size = 9 * MiB;
    fault_fill(b);
  }
  expect_injected();
  fault_block_t *b = &pool[pool_count - 1];
  tes_fault_fail_always(TES_FAULT_MREMAP, true);
  tes_fault_fail_always(TES_FAULT_MMAP, true);
  errno = 0;
  CHECK(tes_realloc(b->ptr, 200 * MiB) == NULL && errno == ENOMEM);
  tes_fault_clear();
  pool_free_all();
}

/* A new thread needs a heap of its own. With every mmap failing, its
 * allocations fail cleanly, and once the fault clears the same thread gets
 * memory. Threads that start and exit under the fault leave no damage. */
static atomic_int thread_phase;
static fault_block_t thread_blocks[64];

static void *thread_main(void *arg) {
  (void)arg;
  /* Phase 0: the fault is on. */
  int nulls = 0, got = 0;
  for (int i = 0; i < 200000 && nulls == 0; i++) {
    errno = 0;
    void *p = tes_malloc(512);
    if (p == NULL) {
      CHECK(errno == ENOMEM);
      nulls++;
    } else if (got < 64) {
      thread_blocks[got].ptr = p;
      thread_blocks[got].size = 512;
      thread_blocks[got].seed = 900000u + (uint32_t)got;
      fault_fill(&thread_blocks[got++]);
    }
    /* Blocks beyond the 64 tracked are left live on purpose: they fill the
     * heap so a failure must come. */
  }
  CHECK(nulls == 1);
  for (int i = 0; i < got; i++) CHECK(fault_intact(&thread_blocks[i]));
  atomic_store(&thread_phase, 1);
  while (atomic_load(&thread_phase) != 2) sched_yield();
  /* Phase 2: the fault is cleared. */
  for (int i = 0; i < 1000; i++) {
    unsigned char *p = tes_malloc(64 + (size_t)i);
    CHECK(p != NULL);
    memset(p, 0x11, 64 + (size_t)i);
    tes_free(p);
  }
  for (int i = 0; i < got; i++) {
    CHECK(fault_intact(&thread_blocks[i]));
    tes_free(thread_blocks[i].ptr);
  }
  return NULL;
}

static void *short_thread_main(void *arg) {
  (void)arg;
  errno = 0;
  void *p = tes_malloc(100);
  if (p == NULL) CHECK(errno == ENOMEM);
  else {
    memset(p, 0x22, 100);
    tes_free(p);
  }
  return NULL;
}

static void check_thread_heap(void) {
  for (int i = 0; i < 100; i++) pool_add(tes_malloc(300), 300);
  injected_before = tes_fault_injected();
  tes_fault_fail_always(TES_FAULT_MMAP, true);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0);
  while (atomic_load(&thread_phase) != 1) sched_yield();
  expect_injected();
  /* Threads that start, allocate and exit while the fault is on. */
  for (int i = 0; i < 16; i++) {
    pthread_t s;
    CHECK(pthread_create(&s, NULL, short_thread_main, NULL) == 0);
    CHECK(pthread_join(s, NULL) == 0);
  }
  pool_verify();
  tes_fault_clear();
  atomic_store(&thread_phase, 2);
  CHECK(pthread_join(t, NULL) == 0);
  for (int i = 0; i < 16; i++) {
    pthread_t s;
    CHECK(pthread_create(&s, NULL, short_thread_main, NULL) == 0);
    CHECK(pthread_join(s, NULL) == 0);
  }
  works_after_clear(KIND_MALLOC, 0, 300, 1000);
  pool_free_all();
}

/* First-class heaps: creating one and allocating from it under the fault. */
static void check_heap_new(void) {
  tes_heap_t *warm = tes_heap_new();
  CHECK(warm != NULL);
  for (int i = 0; i < 100; i++) pool_add(tes_heap_malloc(warm, 700), 700);
  injected_before = tes_fault_injected();
  tes_fault_fail_always(TES_FAULT_MMAP, true);
  int nulls = 0;
  for (int i = 0; i < 1000000 && nulls == 0; i++) {
    errno = 0;
    void *p = tes_heap_malloc(warm, 700);
    if (p == NULL) {
      CHECK(errno == ENOMEM);
      nulls++;
    }
  }
  CHECK(nulls == 1);
  errno = 0;
  tes_heap_t *h = tes_heap_new();
  if (h == NULL) {
    CHECK(errno == ENOMEM);
  } else {
    errno = 0;
    void *p = tes_heap_malloc(h, 5 * MiB);
    CHECK(p == NULL && errno == ENOMEM);
    tes_heap_destroy(h);
  }
  expect_injected();
  pool_verify();
  tes_fault_clear();
  h = tes_heap_new();
  CHECK(h != NULL);
  for (int i = 0; i < 100; i++) {
    void *p = tes_heap_malloc(h, 1000);
    CHECK(p != NULL);
    memset(p, 0x33, 1000);
  }
  tes_heap_destroy(h);
  pool_verify();
  tes_heap_destroy(warm); /* frees the pool's blocks too */
  pool_count = 0;
  works_after_clear(KIND_MALLOC, 0, 700, 100);
  pool_free_all();
}


/* No process-wide lock is held across a memory system call on the paths
 * other threads contend for (docs/PERFORMANCE.md, twenty-fourth session,
 * lock24): the purge sweeps of every heap (a slow path's, the purge
 * thread's, tes_collect's), thread exit (parking, abandoning), a new
 * thread's heap struct, first-class heaps' collects, the segment cache's
 * purges and a large block's waiting tail. The hook counts each mmap, munmap, mremap, madvise, mprotect and
 * mincore made while the calling thread held the heaps lock, the abandon
 * lock, the segment cache's, the segment list's, the abandoned list's or
 * the large blocks' (fault.h). Before, the sweep held the heaps lock over every heap's
 * madvise calls, and the threads that wanted it (a thread starting or
 * exiting, another sweep) spun and yielded meanwhile: mstress/8t's
 * sched_yield calls; an abandon held the abandon lock over its heap's
 * purges (300 such calls a run of this check, 0 now). Every block
 * is verified, so a purge of a page in use (the hazard of purging outside
 * the lock) would show too. */
#define UNLOCKED_THREADS 4
#define UNLOCKED_BLOCKS 600
static void *unlocked_worker(void *arg) {
  uint32_t seed = (uint32_t)(uintptr_t)arg * 100000u;
  static const size_t sizes[] = {48, 200, 700, 3000, 9000, 40000};
  fault_block_t blocks[UNLOCKED_BLOCKS];
  for (int round = 0; round < 6; round++) {
    for (int i = 0; i < UNLOCKED_BLOCKS; i++) {
      blocks[i].size = sizes[(size_t)(i + round) % (sizeof sizes / sizeof sizes[0])];
      blocks[i].ptr = tes_malloc(blocks[i].size);
      CHECK(blocks[i].ptr != NULL);
      blocks[i].seed = ++seed;
      fault_fill(&blocks[i]);
    }
    for (int i = 0; i < UNLOCKED_BLOCKS; i += 2) { /* half the pages retire: purges are scheduled */
      CHECK(fault_intact(&blocks[i]));
      tes_free(blocks[i].ptr);
    }
    usleep(3000); /* past the purge delay: the next slow paths sweep */
    for (int i = 1; i < UNLOCKED_BLOCKS; i += 2) {
      CHECK(fault_intact(&blocks[i]));
      tes_free(blocks[i].ptr);
    }
  }
  return NULL;
}

/* 4 MiB of medium blocks, all freed but the first: its segment stays in
 * use, the others' pages wait for their purge. Returns the one kept. */
static void *unlocked_keeper(void *arg) {
  (void)arg;
  static _Thread_local void *blocks[100];
  for (int i = 0; i < 100; i++) {
    blocks[i] = tes_malloc(40000);
    CHECK(blocks[i] != NULL);
    memset(blocks[i], 7, 40000);
  }
  for (int i = 1; i < 100; i++) tes_free(blocks[i]);
  return blocks[0];
}

static void check_purge_unlocked(void) {
  CHECK(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 1) == 0);
  CHECK(tes_option_set(TES_OPTION_PURGE_THREAD, 1) == 0);
  tes_stats_t before, after;
  tes_stats_get(&before);
  tes_heap_t *fc = tes_heap_new(); /* a first-class heap: tes_collect collects it too */
  CHECK(fc != NULL);
  for (int generation = 0; generation < 8; generation++) {
    pthread_t t[UNLOCKED_THREADS];
    for (int i = 0; i < UNLOCKED_THREADS; i++)
      CHECK(pthread_create(&t[i], NULL, unlocked_worker, (void *)(uintptr_t)(generation * UNLOCKED_THREADS + i + 1)) == 0);
    void *big = tes_malloc(6 * MiB); /* a large block: its segment goes to the cache, purged there */
    CHECK(big != NULL);
    memset(big, 1, 6 * MiB);
    /* A block in a cached segment whose dirty tail waits to be purged
     * behind it (src/large.c, tail list): a 3.5 MiB block's, then 1 MiB. */
    void *tail = tes_malloc(3 * MiB + MiB / 2);
    CHECK(tail != NULL);
    memset(tail, 2, 3 * MiB + MiB / 2);
    tes_free(tail);
    tail = tes_malloc(MiB);
    CHECK(tail != NULL);
    memset(tail, 3, MiB);
    for (int i = 0; i < 200; i++) tes_free(tes_heap_malloc(fc, 5000));
    for (int i = 0; i < UNLOCKED_THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    usleep(3000);
    tes_collect(false); /* the tail is due: purged */
    tes_free(tail);
    tes_free(big);
    tes_collect(generation % 2 == 0); /* forced: every heap, the cache; else what is due */
  }
  tes_heap_destroy(fc);
  /* Exited threads' heaps parked with retired pages not due yet (a long
   * delay) in segments a block keeps in use, then abandoned by a forced
   * collect, which purges those pages. */
  CHECK(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 10000) == 0);
  pthread_t t[UNLOCKED_THREADS];
  void *kept[UNLOCKED_THREADS];
  for (int i = 0; i < UNLOCKED_THREADS; i++) CHECK(pthread_create(&t[i], NULL, unlocked_keeper, NULL) == 0);
  for (int i = 0; i < UNLOCKED_THREADS; i++) CHECK(pthread_join(t[i], &kept[i]) == 0);
  uint64_t locked_before = tes_fault_locked_syscalls();
  tes_stats_get(&after);
  tes_collect(true);
  tes_stats_t trimmed;
  tes_stats_get(&trimmed);
  CHECK(trimmed.os_madvise_calls > after.os_madvise_calls); /* the parked heaps' pages were purged */
  CHECK(tes_fault_locked_syscalls() == locked_before);
  for (int i = 0; i < UNLOCKED_THREADS; i++) tes_free(kept[i]);
  tes_stats_get(&after);
  CHECK(after.os_madvise_calls > before.os_madvise_calls + 50); /* the purges did run */
  if (tes_fault_locked_syscalls() != 0)
    fprintf(stderr, "%llu memory system calls made under a process-wide lock\n",
            (unsigned long long)tes_fault_locked_syscalls());
  CHECK(tes_fault_locked_syscalls() == 0);
}

/* ---- Packed large blocks' purge schedule (src/large.c, rev26) ------------ */
void tes_large_purge_tails(bool force); /* internal (large.c): the timed purge of hosts and tails */

/* Resident OS pages among the whole pages of [p, p + n). */
static size_t resident_pages(const void *p, size_t n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uintptr_t lo = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1), hi = ((uintptr_t)p + n) & ~(uintptr_t)(page - 1);
  static unsigned char vec[1024];
  size_t count = (hi - lo) / page, resident = 0;
  CHECK(count <= sizeof vec && mincore((void *)lo, hi - lo, vec) == 0);
  for (size_t i = 0; i < count; i++) resident += vec[i] & 1;
  return resident;
}

#define PACKED(granules) ((granules) * 64 * KiB - 4 * KiB) /* fills a run of that many 64 KiB granules */
static int pack_gap_calls;
static void purge_in_gap(void) {
  tes_fault_pack_gap = NULL; /* once */
  pack_gap_calls++;
  tes_large_purge_tails(false);
}

/* A packed block's free looked at its host's due (unlocked, until rev26),
 * saw one set, and the timed purge ran before the free took the lock: it
 * found nothing aging (the block was not free yet), cleared the due and
 * set none. The freed run then had no due and stayed resident until a
 * forced collect. The hook runs the purge right before the lock. */
static void check_pack_release_purge(void) {
  CHECK(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 0) == 0);
  tes_collect(true);
  void *keep = tes_malloc(PACKED(3)), *y = tes_malloc(PACKED(3)), *x = tes_malloc(PACKED(4));
  CHECK(keep != NULL && y != NULL && x != NULL);
  memset(y, 1, PACKED(3));
  memset(x, 2, PACKED(4));
  tes_free(y); /* a due: y's run is aging */
  tes_fault_pack_gap = purge_in_gap;
  tes_free(x); /* the purge runs between its look and its lock */
  CHECK(pack_gap_calls == 1);
  tes_collect(false); /* x's run is due at once (delay 0) */
  size_t left = resident_pages(x, PACKED(4));
  if (left != 0) fprintf(stderr, "a freed packed run kept %zu pages after its due\n", left);
  CHECK(left == 0);
  tes_free(keep);
  tes_collect(true);
}

/* A forced collect whose madvise of a host's free granules failed left
 * them dirty with no due: only another forced collect tried again. */
static void check_pack_purge_failed(void) {
  CHECK(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 0) == 0);
  tes_collect(true);
  void *keep = tes_malloc(PACKED(3)), *x = tes_malloc(PACKED(4));
  CHECK(keep != NULL && x != NULL);
  memset(x, 2, PACKED(4));
  tes_free(x);
  injected_before = tes_fault_injected();
  tes_fault_fail_always(TES_FAULT_MADVISE, true);
  tes_collect(true);
  expect_injected();
  tes_fault_clear();
  CHECK(resident_pages(x, PACKED(4)) > 0); /* not purged: madvise failed */
  tes_collect(false); /* the granules got a due again: purged now */
  size_t left = resident_pages(x, PACKED(4));
  if (left != 0) fprintf(stderr, "a host's granules kept %zu pages after a failed forced purge\n", left);
  CHECK(left == 0);
  tes_free(keep);
  tes_collect(true);
}

/* ---- A remote free's last store after its page retired (free.c, race27) -- */
/* A remote free into a page tagged USE_DELAYED (it was full once) sets the
 * page's word to FREEING, pushes its block onto the owner heap's delayed
 * list, then sets the word back to NORMAL. Between the push and that last
 * store, the owner may take the block, empty the page, retire it and
 * release its segment: the store then went into a released segment's
 * header (unmapped: SIGSEGV; or set up again for another page: a wrong
 * state there, TSan's report in sanitize.lib_fc_sweep_stress, tcm27). The
 * hook (tes_fault_delayed_gap) holds the freer in that window until the
 * owner's forced collect has returned, or until the owner waits for the
 * store (tes_fault_freeing_waits), as it must. A medium class: nothing of
 * stdio's or the thread library's shares its segment, so the collect
 * releases and unmaps it. */
#define DELAYED_SIZE (12 * KiB)
#define DELAYED_BLOCKS 130 /* three medium pages' worth: the first one fills and goes to the full queue */
static void *delayed_blocks[DELAYED_BLOCKS];
static atomic_int delayed_phase; /* 1: the freer is in the window; 2: the owner's collect returned */
static atomic_int delayed_gap_calls;
static uint64_t delayed_waits_before;

static void delayed_gap(void) {
  tes_fault_delayed_gap = NULL; /* once */
  atomic_fetch_add(&delayed_gap_calls, 1);
  atomic_store(&delayed_phase, 1);
  while (atomic_load(&delayed_phase) != 2 && tes_fault_freeing_waits() == delayed_waits_before) sched_yield();
}

static void delayed_store_crashed(int sig) {
  (void)sig;
  static const char msg[] = "fault.delayed_retire: the remote free's last store hit its page's released segment "
                            "(SIGSEGV)\n";
  ssize_t n = write(2, msg, sizeof msg - 1);
  (void)n;
  _exit(1);
}

static void *delayed_freer(void *block) {
  tes_free(block);
  return NULL;
}

static void check_delayed_retire(void) {
  for (int i = 0; i < DELAYED_BLOCKS; i++) {
    delayed_blocks[i] = tes_malloc(DELAYED_SIZE);
    CHECK(delayed_blocks[i] != NULL);
    memset(delayed_blocks[i], 0x33, DELAYED_SIZE);
  }
  /* The first page keeps its first block only (and its USE_DELAYED tag,
   * which stays when a page leaves the full queue); the others retire. */
  for (int i = 1; i < DELAYED_BLOCKS; i++) tes_free(delayed_blocks[i]);
  tes_collect(false);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = delayed_store_crashed;
  CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
  delayed_waits_before = tes_fault_freeing_waits();
  tes_fault_delayed_gap = delayed_gap;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, delayed_freer, delayed_blocks[0]) == 0);
  while (atomic_load(&delayed_phase) != 1) sched_yield();
  /* The block is on this heap's delayed list: the collect takes it, the
   * page empties and retires, the segment is released and unmapped. */
  tes_collect(true);
  atomic_store(&delayed_phase, 2);
  CHECK(pthread_join(t, NULL) == 0);
  signal(SIGSEGV, SIG_DFL);
  CHECK(atomic_load(&delayed_gap_calls) == 1); /* the free went through the delayed list */
  if (tes_fault_freeing_waits() == delayed_waits_before)
    fprintf(stderr, "the owner retired the page without waiting for the remote free's last store\n");
  CHECK(tes_fault_freeing_waits() > delayed_waits_before);
  /* The allocator goes on. */
  void *p = tes_malloc(DELAYED_SIZE);
  CHECK(p != NULL);
  memset(p, 0x44, DELAYED_SIZE);
  tes_free(p);
  tes_collect(true);
}

/* The hardened build keeps an emptied page a purge delay (heap.c,
 * page_keep_empty) instead of retiring it: the block that empties it may
 * come through the delayed list on a malloc slow path, the kept page may be
 * purged in place by any thread's forced purge (kept_purge_locked), and its
 * owner then carves it afresh (kept_take: tes_page_init stores the page's
 * word), all inside the freer's window. Its last store then cleared the new
 * page's tag: a USE_DELAYED set when the page next filled became NORMAL
 * while the page sat in the full queue, and its remote frees waited on its
 * stack, unseen. The owner must wait there too. In the default build the
 * same slow path retires the page (no kept pages): the retire's wait. */
int64_t tes_heaps_purge(int64_t now, bool force); /* internal (heap.c): every heap's due purges; forced: kept pages too */

static void check_delayed_kept_purged(void) {
  CHECK(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 100000) == 0); /* kept pages stay kept until purged by force */
  /* Two pages' worth exactly: the second page, the class's head, dry. */
  uintptr_t page_mask = ~(uintptr_t)(512 * KiB - 1);
  size_t per_page = 0;
  for (;;) {
    void *p = tes_malloc(DELAYED_SIZE);
    CHECK(p != NULL && per_page < DELAYED_BLOCKS);
    delayed_blocks[per_page++] = p;
    if (((uintptr_t)p & page_mask) != ((uintptr_t)delayed_blocks[0] & page_mask)) break;
  }
  per_page--; /* the last one is the second page's first */
  CHECK(2 * per_page <= DELAYED_BLOCKS);
  for (size_t i = per_page + 1; i < 2 * per_page; i++) {
    delayed_blocks[i] = tes_malloc(DELAYED_SIZE);
    CHECK(delayed_blocks[i] != NULL);
    CHECK(((uintptr_t)delayed_blocks[i] & page_mask) == ((uintptr_t)delayed_blocks[per_page] & page_mask));
  }
  /* The first page keeps its first block only, back in its class queue
   * with its USE_DELAYED tag, behind the dry head. */
  for (size_t i = 1; i < per_page; i++) tes_free(delayed_blocks[i]);
  tes_collect(false);
  delayed_waits_before = tes_fault_freeing_waits();
  tes_fault_delayed_gap = delayed_gap;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, delayed_freer, delayed_blocks[0]) == 0);
  while (atomic_load(&delayed_phase) != 1) sched_yield();
  /* A class never used: the slow path takes the delayed block, the first
   * page empties (kept, hardened). */
  void *other = tes_malloc(20000);
  CHECK(other != NULL);
  tes_heaps_purge(0, true); /* the kept page purged in place */
  /* The head is dry: the kept page is taken back and carved afresh. */
  void *again = tes_malloc(DELAYED_SIZE);
  CHECK(again != NULL);
  atomic_store(&delayed_phase, 2);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(atomic_load(&delayed_gap_calls) == 1);
  if (tes_fault_freeing_waits() == delayed_waits_before)
    fprintf(stderr, "the owner gave the page back without waiting for the remote free's last store\n");
  CHECK(tes_fault_freeing_waits() > delayed_waits_before);
  tes_free(again);
  tes_free(other);
  for (size_t i = per_page; i < 2 * per_page; i++) tes_free(delayed_blocks[i]);
  tes_collect(true);
}

typedef struct fault_check_s {
  const char *name;
  void (*run)(void);
} fault_check_t;

static const fault_check_t checks[] = {
  {"first_segment", check_first_segment},
  {"segment_growth", check_segment_growth},
  {"nth_mmap_sweep", check_nth_mmap_sweep},
  {"large_mmap", check_large_mmap},
  {"huge_realloc_mremap", check_huge_realloc_mremap},
  {"madvise_purge", check_madvise_purge},
  {"aligned_paths", check_aligned_paths},
  {"calloc", check_calloc},
  {"realloc_move", check_realloc_move},
  {"guarded_remap", check_guarded_remap},
  {"thread_heap", check_thread_heap},
  {"heap_new", check_heap_new},
  {"purge_unlocked", check_purge_unlocked},
  {"pack_release_purge", check_pack_release_purge},
  {"pack_purge_failed", check_pack_purge_failed},
  {"delayed_retire", check_delayed_retire},
  {"delayed_kept_purged", check_delayed_kept_purged},
};

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) puts(checks[i].name);
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: %s CHECK | --list\n", argv[0]);
    return 2;
  }
  for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
    if (strcmp(argv[1], checks[i].name) == 0) {
      checks[i].run();
      tes_fault_clear();
      printf("fault.%s: ok (%llu failures injected)\n", checks[i].name,
             (unsigned long long)tes_fault_injected());
      return 0;
    }
  }
  fprintf(stderr, "%s: unknown check '%s' (try --list)\n", argv[0], argv[1]);
  return 2;
}
