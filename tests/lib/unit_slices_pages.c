/* unit_slices_pages.c — the pages a new thread's slice table makes resident
 * (src/internal.h, tes_slices_t). A thread's first malloc sets tag[0]
 * (tes_heap_setup), then one slot's tag and entry for the page it carves,
 * and marks the slot's 4 KiB run of tags in tag_runs_written. That field
 * sat at the end of the 192 KiB table, alone on its page: every thread
 * that allocated, and every small program at its first malloc, faulted in
 * one page (4 KiB resident) for two bytes. It now shares tag[0]'s page.
 * Checked on a fresh thread's table (a new struct from the heap pool's
 * fresh mapping, so only what was written is resident): at most three
 * pages (tag[0]'s, the slot's tag, the slot's entry), where it was four;
 * and the field lies in tag[0]'s page. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t resident_pages(const void *start, size_t size) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uintptr_t lo = (uintptr_t)start & ~(page - 1);
  uintptr_t hi = ((uintptr_t)start + size + page - 1) & ~(page - 1);
  size_t n = (hi - lo) / page, count = 0;
  unsigned char *vec = malloc(n);
  REQUIRE(vec != NULL, "mincore vector");
  REQUIRE(mincore((void *)lo, hi - lo, vec) == 0, "mincore");
  for (size_t i = 0; i < n; i++) count += vec[i] & 1;
  free(vec);
  return count;
}

static size_t thread_pages;
static bool same_page;

static void *fresh_thread(void *arg) {
  (void)arg;
  void *volatile p = malloc(16);
  REQUIRE(p != NULL, "malloc");
  const tes_slices_t *slices = tes_tls_slices;
  REQUIRE(slices != &tes_slices_none, "the thread has a table");
  uintptr_t mask = ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
  same_page = ((uintptr_t)&slices->tag_runs_written & mask) == ((uintptr_t)&slices->tag[0] & mask);
  thread_pages = resident_pages(slices, sizeof *slices);
  free(p);
  return NULL;
}

int main(void) {
  /* The main thread takes the pool's first struct (and maps the chunk). */
  void *volatile first = malloc(16);
  REQUIRE(first != NULL, "malloc");
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, fresh_thread, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  free(first);
  CHECK(same_page, "tag_runs_written is not in tag[0]'s page");
  CHECK(thread_pages <= 3, "a new thread's first malloc made %zu pages of its slice table resident (at most 3)",
        thread_pages);
  printf("slice table pages resident after a thread's first malloc: %zu\n", thread_pages);
  return unit_finish("unit_slices_pages");
}
