/* fuzz_api.c — libFuzzer harness: sequences of libtessera API calls whose
 * kinds, sizes, alignments and targets come from the input.
 *
 * The input is read as a program: one opcode byte, then the bytes its
 * arguments need. 32 slots hold live blocks; every block is filled with a
 * pattern seeded per block, re-checked in full whenever an operation touches
 * it and, for every live block, at the end of each input. Checked besides
 * contents: alignment (16 bytes always, the requested alignment for the
 * aligned calls), tes_usable_size >= the request, calloc memory is zero,
 * realloc keeps the common prefix, overflowing calloc/reallocarray fail
 * with ENOMEM, invalid alignments with EINVAL, and a first-class heap's
 * blocks (malloc, calloc and realloc in it) vanish with tes_heap_destroy
 * and stay intact through tes_heap_delete. Any violation prints what and aborts,
 * which libFuzzer reports as a crash with the input saved.
 *
 * Built with FUZZ_HOSTILE (fuzz_api_secure, the hardened build), two more
 * opcodes make bad calls with the allocator set to report and continue: a
 * free of a block just freed, of an interior or misaligned pointer into a
 * live block, of a block written 1-4 bytes past its end, and of pointers
 * tessera never handed out (the stack, a global, libc's malloc). Each must
 * print its one error line, naming the kind and the address, and leave
 * every live block intact; the overflowed block is still freed.
 *
 * Links tessera_nooverride (tes_* only) so libFuzzer's own mallocs stay on
 * libc. Built by tests/fuzz/CMakeLists.txt in the clang sub-build that
 * tests/fuzz/fuzz.sh drives. */
#if FUZZ_HOSTILE
#define _GNU_SOURCE /* pipe2 */
#endif
#include "tessera.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 32
#if FUZZ_HOSTILE
#include <fcntl.h>
#include <unistd.h>
#define OPS 16 /* 14 and 15: the bad calls */
#else
#define OPS 14
#endif

/* The pattern loops touch megabytes per input: keep libFuzzer's comparison
 * tracing out of them (it would be most of the run time and only teaches the
 * fuzzer about our own pattern). ASan still checks their accesses. */
#if defined(__clang__)
#define NO_COVERAGE __attribute__((no_sanitize("coverage"), noinline))
#else
#define NO_COVERAGE
#endif

typedef struct slot_s {
  unsigned char *ptr;
  size_t size;
  uint64_t seed;
  bool in_heap; /* allocated from the fuzz heap, freed by tes_heap_destroy */
} slot_t;

typedef struct input_s {
  const uint8_t *data;
  size_t len, pos;
} input_t;

static slot_t slots[SLOTS];
static uint64_t seed_counter;
static tes_heap_t *fuzz_heap;

#define FAIL(...)                                   \
  do {                                              \
    fprintf(stderr, "fuzz_api: " __VA_ARGS__);      \
    fputc('\n', stderr);                            \
    abort();                                        \
  } while (0)

static uint8_t take8(input_t *in) { return in->pos < in->len ? in->data[in->pos++] : 0; }
static uint16_t take16(input_t *in) { return (uint16_t)(take8(in) | take8(in) << 8); }

/* FUZZ_PACK_SIZES=1 in the environment: the ranges 1-3 below give sizes
 * in the packed large blocks' range instead (above 128 KiB, up to 1 MiB
 * with the header: large.c), half of them within 32 bytes of a 64 KiB
 * granule's edge, so runs of every length meet, grow and shrink in shared
 * hosts. The default build packs only there, and the plain ranges reach it
 * about one size in ten. */
static bool pack_sizes;
#define PACK_GRANULE ((size_t)64 << 10)
/* A block's usable bytes are whole 4 KiB pages after a 512-byte header:
 * the largest that fits g granules is g * 64 KiB - 4 KiB. */
static size_t pack_size(uint8_t range, uint16_t v) {
  if (range & 8) return ((size_t)128 << 10) + 1 + (size_t)v * 14; /* 128 KiB + 1 .. 1 MiB + 21 KiB */
  size_t granules = 3 + (size_t)v % 14;                            /* runs of 3..16 granules */
  return granules * PACK_GRANULE - 4096 - 16 + (size_t)(range >> 4 & 15) * 2 + (v >> 15);
}

/* Sizes spread over every path: tiny, small classes, medium, large, huge
 * (at most 4 MiB, so an input runs in milliseconds). */
static size_t take_size(input_t *in) {
  uint8_t range = take8(in);
  uint16_t v = take16(in);
  if (pack_sizes && (range & 7) >= 1 && (range & 7) <= 3) return pack_size(range, v);
  switch (range & 7) {
    case 0: return v % 33;                          /* 0..32, including 0 */
    case 1: case 2: return v % 1025;
    case 3: return v % 16385;
    case 4: return (size_t)v * 2 + (range >> 3);    /* up to 128 KiB */
    case 5: return (size_t)(v % 4096) * 256 + (range >> 3); /* up to 1 MiB */
    case 6: {                                       /* around powers of two */
      size_t power = (size_t)1 << (v % 23);
      size_t delta = range >> 3;                    /* 0..31, centred on 16 */
      return delta >= 16 ? power + (delta - 16) : (power > 16 - delta ? power - (16 - delta) : 1);
    }
    default:                                        /* 1 in 4: up to 4 MiB, in 64 KiB steps */
      return (range & 0x18) == 0 ? (size_t)(v % 64) << 16 : (size_t)v % 4096;
  }
}

/* The pattern: 64-bit words, word k of a block a hash of (seed, k), so
 * filling and checking go a word at a time. */
static inline uint64_t pattern_word(uint64_t seed, size_t k) {
  return (seed ^ (uint64_t)k) * 0x9E3779B97F4A7C15ull;
}

static inline unsigned char pattern(uint64_t seed, size_t i) {
  return (unsigned char)(pattern_word(seed, i / 8) >> (i % 8 * 8));
}

NO_COVERAGE static void fill(slot_t *s) {
  size_t words = s->size / 8;
  for (size_t k = 0; k < words; k++) {
    uint64_t w = pattern_word(s->seed, k);
    memcpy(s->ptr + k * 8, &w, 8);
  }
  for (size_t i = words * 8; i < s->size; i++) s->ptr[i] = pattern(s->seed, i);
}

NO_COVERAGE static void verify(const slot_t *s, size_t len, const char *when) {
  size_t words = len / 8;
  for (size_t k = 0; k < words; k++) {
    uint64_t w;
    memcpy(&w, s->ptr + k * 8, 8);
    if (w != pattern_word(s->seed, k)) {
      len = k * 8 + 8; /* report the first wrong byte below */
      for (size_t i = k * 8; i < len; i++)
        if (s->ptr[i] != pattern(s->seed, i))
          FAIL("%s: block %p (%zu bytes) byte %zu is 0x%02x, expected 0x%02x", when,
               (void *)s->ptr, s->size, i, s->ptr[i], pattern(s->seed, i));
    }
  }
  for (size_t i = words * 8; i < len; i++)
    if (s->ptr[i] != pattern(s->seed, i))
      FAIL("%s: block %p (%zu bytes) byte %zu is 0x%02x, expected 0x%02x", when,
           (void *)s->ptr, s->size, i, s->ptr[i], pattern(s->seed, i));
}

NO_COVERAGE static size_t first_nonzero(const unsigned char *p, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (p[i]) return i;
  return len;
}

static void adopt(slot_t *s, void *p, size_t size, size_t alignment, bool in_heap) {
  if (((uintptr_t)p & 15) != 0) FAIL("%p (size %zu) is not 16-byte aligned", p, size);
  if (alignment && ((uintptr_t)p & (alignment - 1)) != 0)
    FAIL("%p (size %zu) is not aligned to %zu", p, size, alignment);
  if (tes_usable_size(p) < size)
    FAIL("usable size %zu < requested %zu at %p", tes_usable_size(p), size, p);
  s->ptr = p;
  s->size = size;
  s->seed = ++seed_counter * 0x9E3779B97F4A7C15ull;
  s->in_heap = in_heap;
  fill(s);
}

static void release(slot_t *s) {
  if (!s->ptr) return;
  verify(s, s->size, "before free");
  tes_free(s->ptr);
  s->ptr = NULL;
}

static void expect_fail(void *p, int err, const char *what) {
  if (p != NULL) FAIL("%s succeeded, expected errno %d", what, err);
  if (errno != err) FAIL("%s: errno %d, expected %d", what, errno, err);
}

#if FUZZ_HOSTILE
/* Runs bad(arg) with stderr going to a pipe and checks that the allocator
 * printed one error line containing `kind` (or `other`, when not NULL) and
 * the address p (as %p). */
static void expect_report_of(void (*bad)(void *), void *arg, const void *p, const char *kind, const char *other) {
  int fds[2];
  if (pipe2(fds, O_NONBLOCK) != 0) FAIL("pipe2 failed");
  fflush(stderr);
  int saved = dup(2);
  dup2(fds[1], 2);
  bad(arg);
  dup2(saved, 2);
  close(saved);
  close(fds[1]);
  char text[1024];
  ssize_t n = read(fds[0], text, sizeof text - 1);
  close(fds[0]);
  text[n > 0 ? n : 0] = '\0';
  char address[32];
  snprintf(address, sizeof address, "%p", p);
  if ((strstr(text, kind) == NULL && (other == NULL || strstr(text, other) == NULL)) || strstr(text, address) == NULL)
    FAIL("bad call on %p: expected a report of \"%s\" naming %s, got \"%s\"", p, kind, address, text);
}

static void expect_report(void (*bad)(void *), void *arg, const void *p, const char *kind) {
  expect_report_of(bad, arg, p, kind, NULL);
}

static void bad_free(void *p) { tes_free(p); }

static char global_buffer[64];

/* A free that must be refused and reported, with the block itself intact
 * afterwards (interior and misaligned pointers), or one that frees the
 * block after reporting (a block written past its end). */
static void hostile_live(input_t *in, slot_t *s) {
  uint8_t kind = take8(in), n = take8(in);
  if (!s->ptr || s->in_heap) return;
  switch (kind % 4) {
    case 0: { /* freed, then freed again before anything else happens */
      void *p = s->ptr;
      release(s);
      /* When that free gave the block's page or segment back (its last
       * block), this was reported as an invalid free (found by fuzzing;
       * RELIABILITY.md); the retired page's descriptor, or the ring of
       * released segments, now names it (seventeenth session). */
      expect_report(bad_free, p, p, "double free");
      break;
    }
    case 1: /* inside the block, 16-byte aligned */
      if (s->size >= 32) {
        size_t offset = 16 * (1 + (size_t)n % ((s->size - 16) / 16));
        /* Where a large block started that was freed lately (large.c's
         * ring), the free is judged a second free of that block: a stale
         * pointer freed again is the likelier bug (found by fuzzing). */
        expect_report_of(bad_free, s->ptr + offset, s->ptr + offset, "invalid free", "already freed)");
        verify(s, s->size, "after an interior free");
      }
      break;
    case 2: { /* misaligned */
      unsigned char *q = s->ptr + 1 + n % 15;
      expect_report(bad_free, q, q, "invalid free");
      verify(s, s->size, "after a misaligned free");
      break;
    }
    default: { /* 1-4 bytes past the requested size, then freed */
      verify(s, s->size, "before an overflow");
      /* Each byte changed (inverted): a write of the canary's own value
       * cannot be seen by any canary (fuzzing found a page whose canary
       * began with the 0xA5 written here before). */
      for (size_t i = 0; i < 1 + (size_t)n % 4; i++) s->ptr[s->size + i] ^= 0xFF;
      void *p = s->ptr;
      s->ptr = NULL;
      expect_report(bad_free, p, p, "overflow");
      break;
    }
  }
}

/* Pointers tessera never handed out. */
static void hostile_foreign(input_t *in) {
  uint8_t kind = take8(in);
  char local[64];
  void *p;
  switch (kind % 3) {
    case 0: p = local + (kind >> 2) % 4 * 16; break;
    case 1: p = global_buffer + (kind >> 2) % 4 * 16; break;
    default: p = malloc(16 + (size_t)(kind >> 2) * 16); break; /* libc's */
  }
  if (p == NULL) FAIL("libc malloc returned NULL");
  expect_report(bad_free, p, p, "invalid free");
  if (kind % 3 == 2) free(p);
}
#endif

static void run_op(input_t *in) {
  uint8_t op = take8(in);
  slot_t *s = &slots[take8(in) % SLOTS];
  switch (op % OPS) {
    case 0: { /* malloc */
      size_t size = take_size(in);
      release(s);
      void *p = tes_malloc(size);
      if (!p) FAIL("malloc(%zu) returned NULL", size);
      adopt(s, p, size, 0, false);
      break;
    }
    case 1: { /* calloc, sometimes with an overflowing product */
      size_t size = take_size(in);
      uint8_t n = take8(in);
      if (n == 255) {
        errno = 0;
        expect_fail(tes_calloc(SIZE_MAX / 2 + 1, 2 + size), ENOMEM, "calloc overflow");
        break;
      }
      size_t count = (size_t)(n % 8) + 1;
      release(s);
      unsigned char *p = tes_calloc(count, size / count);
      size_t total = count * (size / count);
      if (!p) FAIL("calloc(%zu, %zu) returned NULL", count, size / count);
      size_t nonzero = first_nonzero(p, total);
      if (nonzero < total) FAIL("calloc(%zu, %zu): byte %zu is not zero", count, size / count, nonzero);
      adopt(s, p, total, 0, false);
      break;
    }
    case 2: case 3: { /* realloc (from NULL, grow, shrink) */
      size_t size = take_size(in);
      if (s->ptr && s->in_heap) break; /* heap blocks are tested by case 11 */
      if (size == 0) size = 1;          /* realloc(p, 0) is implementation-defined */
      size_t keep = !s->ptr ? 0 : s->size < size ? s->size : size;
      if (s->ptr) verify(s, s->size, "before realloc");
      unsigned char *p = tes_realloc(s->ptr, size);
      if (!p) FAIL("realloc(%p, %zu) returned NULL", (void *)s->ptr, size);
      s->ptr = p;
      verify(s, keep, "after realloc");
      adopt(s, p, size, 0, false);
      break;
    }
    case 4: case 5: /* free, free_sized */
      if (s->ptr && !s->in_heap && op % OPS == 5) {
        verify(s, s->size, "before free_sized");
        tes_free_sized(s->ptr, s->size);
        s->ptr = NULL;
      } else {
        release(s);
      }
      break;
    case 6: { /* aligned_alloc / posix_memalign / memalign with a power of two */
      size_t alignment = (size_t)1 << (take8(in) % 24);
      size_t size = take_size(in);
      uint8_t which = take8(in) % 3;
      release(s);
      void *p = NULL;
      if (which == 0) p = tes_aligned_alloc(alignment, size);
      else if (which == 1) {
        size_t a = alignment < sizeof(void *) ? sizeof(void *) : alignment;
        int rc = tes_posix_memalign(&p, a, size);
        if (rc) FAIL("posix_memalign(%zu, %zu) = %d", a, size, rc);
        alignment = a;
      } else p = tes_memalign(alignment, size);
      if (!p) FAIL("aligned call %d (%zu, %zu) returned NULL", which, alignment, size);
      adopt(s, p, size, alignment, false);
      break;
    }
    case 7: { /* invalid alignments fail with EINVAL */
      size_t alignment = (size_t)take16(in) * 2 + 3; /* odd, so never a power of two */
      void *p = NULL;
      errno = 0;
      expect_fail(tes_aligned_alloc(alignment, 64), EINVAL, "aligned_alloc(odd)");
      if (tes_posix_memalign(&p, alignment, 64) != EINVAL) FAIL("posix_memalign(odd) != EINVAL");
      /* Beyond the largest alignment honoured: a valid power of two that
       * cannot be served, so NULL with ENOMEM (as glibc) or EINVAL. */
      errno = 0;
      if (tes_aligned_alloc(TES_MAX_ALIGNMENT << 1, 64) != NULL ||
          (errno != ENOMEM && errno != EINVAL))
        FAIL("aligned_alloc(beyond TES_MAX_ALIGNMENT): errno %d", errno);
      break;
    }
    case 8: { /* reallocarray, sometimes overflowing */
      uint8_t n = take8(in);
      size_t size = take_size(in);
      if (s->ptr && s->in_heap) break;
      if (n == 255 && s->ptr) {
        errno = 0;
        expect_fail(tes_reallocarray(s->ptr, SIZE_MAX / 4, 8), ENOMEM, "reallocarray overflow");
        verify(s, s->size, "after failed reallocarray");
        break;
      }
      size_t count = (size_t)(n % 4) + 1, each = size / count + 1;
      size_t keep = !s->ptr ? 0 : s->size < count * each ? s->size : count * each;
      if (s->ptr) verify(s, s->size, "before reallocarray");
      unsigned char *p = tes_reallocarray(s->ptr, count, each);
      if (!p) FAIL("reallocarray(%zu, %zu) returned NULL", count, each);
      s->ptr = p;
      verify(s, keep, "after reallocarray");
      adopt(s, p, count * each, 0, false);
      break;
    }
    case 9: /* valloc / pvalloc */
      release(s);
      {
        size_t size = take_size(in) + 1;
        bool whole_pages = take8(in) & 1;
        void *p = whole_pages ? tes_pvalloc(size) : tes_valloc(size);
        if (!p) FAIL("valloc/pvalloc(%zu) returned NULL", size);
        /* pvalloc asks for whole pages: all of them are the program's. */
        adopt(s, p, whole_pages ? (size + 4095) & ~(size_t)4095 : size, 4096, false);
      }
      break;
    case 10: /* verify everything */
      for (int i = 0; i < SLOTS; i++)
        if (slots[i].ptr) verify(&slots[i], slots[i].size, "full check");
      break;
    case 11: { /* first-class heap: malloc, calloc, realloc from it; delete or destroy it */
      uint8_t what = take8(in) % 5;
      if (what >= 3 && fuzz_heap) {
        /* destroy: its blocks vanish; delete: they stay, as ordinary blocks */
        for (int i = 0; i < SLOTS; i++)
          if (slots[i].ptr && slots[i].in_heap) {
            verify(&slots[i], slots[i].size, what == 4 ? "before heap destroy" : "before heap delete");
            if (what == 4) slots[i].ptr = NULL;
            else slots[i].in_heap = false;
          }
        if (what == 4) tes_heap_destroy(fuzz_heap);
        else tes_heap_delete(fuzz_heap);
        fuzz_heap = NULL;
        if (what == 3)
          for (int i = 0; i < SLOTS; i++)
            if (slots[i].ptr) verify(&slots[i], slots[i].size, "after heap delete");
        break;
      }
      if (!fuzz_heap) fuzz_heap = tes_heap_new();
      if (!fuzz_heap) FAIL("tes_heap_new returned NULL");
      size_t size = take_size(in);
      if (what == 2) { /* realloc a block of the heap (or NULL) within it */
        if (s->ptr && !s->in_heap) release(s);
        if (size == 0) size = 1;
        size_t keep = !s->ptr ? 0 : s->size < size ? s->size : size;
        if (s->ptr) verify(s, s->size, "before heap realloc");
        unsigned char *p = tes_heap_realloc(fuzz_heap, s->ptr, size);
        if (!p) FAIL("tes_heap_realloc(%p, %zu) returned NULL", (void *)s->ptr, size);
        s->ptr = p;
        verify(s, keep, "after heap realloc");
        adopt(s, p, size, 0, true);
        break;
      }
      release(s);
      unsigned char *p = what == 1 ? tes_heap_calloc(fuzz_heap, 1, size) : tes_heap_malloc(fuzz_heap, size);
      if (!p) FAIL("tes_heap_%s(%zu) returned NULL", what == 1 ? "calloc" : "malloc", size);
      if (what == 1 && first_nonzero(p, size) < size) FAIL("tes_heap_calloc(1, %zu): byte %zu is not zero", size,
                                                         first_nonzero(p, size));
      adopt(s, p, size, 0, true);
      break;
    }
    case 12: /* give memory back, then keep going */
      tes_collect(take8(in) & 1);
      break;
#if FUZZ_HOSTILE
    case 14:
      hostile_live(in, s);
      break;
    case 15:
      hostile_foreign(in);
      break;
#endif
    default: { /* usable size is stable and covers the request */
      if (!s->ptr) break;
      size_t u = tes_usable_size(s->ptr);
      if (u < s->size || u != tes_usable_size(s->ptr)) FAIL("usable size %zu unstable", u);
      /* The slack up to the usable size is ours to write. */
      memset(s->ptr + s->size, 0xEE, u - s->size);
      verify(s, s->size, "after writing the slack");
      break;
    }
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const char *bias = getenv("FUZZ_PACK_SIZES");
  pack_sizes = bias != NULL && bias[0] == '1';
#if FUZZ_HOSTILE
  /* Report and continue: each bad call is checked for its report. */
  if (tes_option_set(TES_OPTION_ABORT_ON_ERROR, 0) != 0) FAIL("abort_on_error cannot be turned off");
#endif
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  input_t in = {data, len > 4096 ? 4096 : len, 0};
  while (in.pos < in.len) run_op(&in);
  for (int i = 0; i < SLOTS; i++) {
    if (slots[i].ptr && slots[i].in_heap) {
      verify(&slots[i], slots[i].size, "end of input");
      slots[i].ptr = NULL; /* released with the heap below */
    } else {
      release(&slots[i]);
    }
  }
  if (fuzz_heap) {
    tes_heap_destroy(fuzz_heap);
    fuzz_heap = NULL;
  }
  return 0;
}
