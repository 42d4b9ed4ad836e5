/* fault_common.h — helpers shared by the fault-injection tests (C and C++).
 *
 * Every test keeps a set of live blocks, each filled with a pattern derived
 * from its own seed, and checks after every injected failure that each block
 * still holds exactly that pattern: an allocator that loses or overwrites
 * memory while recovering from an OS failure is caught here. CHECK() prints
 * file:line and the failed expression and exits 1, so CTest shows what broke.
 * Used by fault_test.c and fault_cxx_test.cpp only. */
#ifndef TESSERA_TESTS_FAULT_COMMON_H
#define TESSERA_TESTS_FAULT_COMMON_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s (errno=%d)\n", __FILE__,        \
              __LINE__, #cond, errno);                                         \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

typedef struct fault_block_s {
  unsigned char *ptr;
  size_t size;
  uint32_t seed;
} fault_block_t;

/* The pattern is a sequence of 64-bit words, word k of a block with this
 * seed being a hash of (seed, k): cheap to write and check a word at a time,
 * and different between neighbouring blocks and neighbouring offsets. */
static inline uint64_t fault_pattern_word(uint32_t seed, size_t k) {
  return (((uint64_t)seed << 32) ^ (uint64_t)k) * 0x9E3779B97F4A7C15ull;
}

static inline unsigned char fault_pattern_byte(uint32_t seed, size_t i) {
  return (unsigned char)(fault_pattern_word(seed, i / 8) >> (i % 8 * 8));
}

static inline void fault_fill(const fault_block_t *b) {
  size_t words = b->size / 8;
  for (size_t k = 0; k < words; k++) {
    uint64_t w = fault_pattern_word(b->seed, k);
    memcpy(b->ptr + k * 8, &w, 8);
  }
  for (size_t i = words * 8; i < b->size; i++) b->ptr[i] = fault_pattern_byte(b->seed, i);
}

/* True when the first `len` bytes of the block still hold its pattern. */
static inline bool fault_prefix_intact(const fault_block_t *b, size_t len) {
  size_t words = len / 8;
  for (size_t k = 0; k < words; k++) {
    uint64_t w;
    memcpy(&w, b->ptr + k * 8, 8);
    if (w != fault_pattern_word(b->seed, k)) return false;
  }
  for (size_t i = words * 8; i < len; i++)
    if (b->ptr[i] != fault_pattern_byte(b->seed, i)) return false;
  return true;
}

static inline bool fault_intact(const fault_block_t *b) {
  return fault_prefix_intact(b, b->size);
}

#endif
