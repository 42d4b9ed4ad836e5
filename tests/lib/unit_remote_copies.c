/* unit_remote_copies.c — every page descriptor's copies for remote frees
 * (default build: area_if_in_use and bin_for_remote on xthread_free's line,
 * src/internal.h) agree with in_use, area and bin after each path that
 * changes those fields: page init and retire, a thread's exit (its heap
 * parked, or abandoned with heap_park 0) and the next thread taking its
 * segments over, first-class heaps deleted (pages moved) and destroyed
 * (pages dropped), segments emptied and taken again from the cache, a large
 * block moved by realloc, and a fork's child. A path that wrote in_use or
 * bin without its copy leaves a page whose remote frees are judged by stale
 * values: a block of a retired page accepted into its remote stack, or a
 * block in its owner's bin freed again and not reported (rev27,
 * docs/RELIABILITY.md). Each check walks every small and medium segment of
 * the process (all pages, set up or not: a remote free does not look at
 * desc_ready) while no other thread runs. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if TES_SECURE
int main(void) {
  puts("unit_remote_copies: the hardened build's remote frees read the page's own fields");
  return 77;
}
#else

static unsigned pages_seen;

static void check_page(const tes_page_t *page, const char *when) {
  const uint8_t *copy = atomic_load_explicit(&page->area_if_in_use, memory_order_relaxed);
  CHECK(copy == (page->in_use ? page->area : NULL), "%s: page %p: in-use copy %p, in_use %u, area %p", when,
        (const void *)page, (const void *)copy, (unsigned)page->in_use, (const void *)page->area);
  if (page->in_use)
    CHECK(atomic_load_explicit(&page->bin_for_remote, memory_order_relaxed) == page->bin,
          "%s: page %p: bin copy %p, bin %p", when, (const void *)page,
          (void *)atomic_load_explicit(&page->bin_for_remote, memory_order_relaxed), (void *)page->bin);
  pages_seen++;
}

static void check_all(const char *when) {
  pages_seen = 0;
  tes_segments_lock();
  for (tes_segment_t *seg = tes_segments_all; seg != NULL; seg = seg->all_next)
    for (uint32_t i = 1; i < seg->page_count; i++) check_page(&seg->pages[i], when);
  tes_segments_unlock(false);
  CHECK(pages_seen > 0, "%s: no page seen", when);
}

/* A large block in a segment of its own: its one descriptor. */
static void check_large(void *p, const char *when) {
  tes_segment_t *seg = tes_owned_segment(p, false);
  REQUIRE(seg != NULL && seg->kind == TES_SEG_LARGE, "%s: a large block's segment", when);
  check_page(&seg->pages[0], when);
}

static const size_t sizes[] = {16, 48, 256, 1000, 3000, 9000, 40000, 100000};
enum { KINDS = sizeof sizes / sizeof sizes[0], PER_KIND = 64 };

typedef struct {
  void *blocks[KINDS][PER_KIND];
} batch_t;

static void batch_fill(batch_t *b) {
  for (int k = 0; k < KINDS; k++)
    for (int i = 0; i < PER_KIND; i++) REQUIRE((b->blocks[k][i] = malloc(sizes[k])) != NULL, "malloc");
}

/* Every other block (pages stay in use), or all of them. */
static void batch_free(batch_t *b, int step) {
  for (int k = 0; k < KINDS; k++)
    for (int i = 0; i < PER_KIND; i += step)
      if (b->blocks[k][i] != NULL) free(b->blocks[k][i]), b->blocks[k][i] = NULL;
}

static batch_t main_batch, thread_batch;

/* Allocates a batch, frees half of main's (remote frees) and half of its
 * own, and exits with the rest live (its heap parked or abandoned). */
static void *exiting_thread(void *arg) {
  (void)arg;
  batch_fill(&thread_batch);
  for (int k = 0; k < KINDS; k++)
    for (int i = 1; i < PER_KIND; i += 4)
      if (main_batch.blocks[k][i] != NULL) free(main_batch.blocks[k][i]), main_batch.blocks[k][i] = NULL;
  batch_free(&thread_batch, 2);
  return NULL;
}

/* The next thread: takes a parked heap over (or adopts abandoned
 * segments), frees the rest of the exited thread's blocks and allocates. */
static void *next_thread(void *arg) {
  (void)arg;
  batch_t mine;
  batch_fill(&mine);
  batch_free(&thread_batch, 1);
  batch_free(&mine, 2);
  tes_collect(true);
  batch_free(&mine, 1);
  return NULL;
}

static void run_thread(void *(*fn)(void *)) {
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, fn, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
}

static void *fc_blocks[256];
static tes_heap_t *fc_heap;
static void *destroy_fc(void *arg) {
  (void)arg;
  tes_heap_destroy(fc_heap); /* another thread's heap: its pages dropped at its owner's next call */
  return NULL;
}

int main(void) {
  batch_fill(&main_batch);
  check_all("fresh pages");
  batch_free(&main_batch, 2);
  tes_collect(true);
  check_all("half freed, collected");

  /* A thread's exit with its heap parked, and the next thread's take-over. */
  run_thread(exiting_thread);
  check_all("thread exited, heap parked");
  run_thread(next_thread);
  check_all("parked heap taken over and emptied");

  /* The same with heap_park 0: abandoned, then adopted. */
  REQUIRE(tes_option_set(TES_OPTION_HEAP_PARK, 0) == 0, "heap_park 0");
  run_thread(exiting_thread);
  check_all("thread exited, heap abandoned");
  run_thread(next_thread);
  check_all("abandoned segments adopted and emptied");
  REQUIRE(tes_option_set(TES_OPTION_HEAP_PARK, 1) == 0, "heap_park 1");

  /* First-class heaps: deleted (pages into this thread's heap) and
   * destroyed by another thread (pages dropped here). */
  fc_heap = tes_heap_new();
  REQUIRE(fc_heap != NULL, "tes_heap_new");
  for (int i = 0; i < 256; i++) REQUIRE((fc_blocks[i] = tes_heap_malloc(fc_heap, sizes[i % KINDS])) != NULL, "heap");
  check_all("first-class heap filled");
  tes_heap_delete(fc_heap);
  check_all("first-class heap deleted");
  for (int i = 0; i < 256; i += 2) free(fc_blocks[i]);
  fc_heap = tes_heap_new();
  REQUIRE(fc_heap != NULL, "tes_heap_new");
  for (int i = 0; i < 256; i++) REQUIRE(tes_heap_malloc(fc_heap, sizes[i % KINDS]) != NULL, "heap");
  run_thread(destroy_fc);
  void *after_destroy = malloc(64); /* the owner's next call drops the destroyed heap's pages */
  tes_collect(true);
  check_all("first-class heap destroyed");

  /* Segments emptied whole and taken again (the cache). */
  batch_free(&main_batch, 1);
  tes_collect(true);
  batch_fill(&main_batch);
  check_all("segments taken again");

  /* A large block of its own segment, grown (moved) and shrunk. */
  void *large = malloc((size_t)6 << 20);
  REQUIRE(large != NULL, "large malloc");
  check_large(large, "large block");
  for (size_t mib = 12; mib <= 48; mib *= 2) {
    large = realloc(large, mib << 20);
    REQUIRE(large != NULL, "large realloc");
    check_large(large, "large block grown");
  }
  large = realloc(large, (size_t)5 << 20);
  REQUIRE(large != NULL, "large realloc");
  check_large(large, "large block shrunk");

  /* A fork's child. */
  fflush(NULL);
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    unit_failures = 0; /* the child's own */
    check_all("fork child");
    batch_free(&main_batch, 2);
    tes_collect(true);
    check_all("fork child, half freed");
    _exit(unit_failures ? 1 : 0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the fork child's checks failed (status %d)", status);
  check_all("fork parent");

  free(large);
  free(after_destroy);
  for (int i = 1; i < 256; i += 2) free(fc_blocks[i]);
  batch_free(&main_batch, 1);
  tes_collect(true);
  check_all("all freed");
  return unit_finish("unit_remote_copies");
}
#endif
