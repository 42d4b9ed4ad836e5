/* page.c — a page: a run of equal blocks and its three free lists.
 *
 * Owns: carving blocks lazily (TES_EXTEND_BYTES at a time, so a fresh page
 * touches only the memory it hands out), collecting the owner's local_free
 * and the remote xthread_free stack back onto `free`, and the delayed-free
 * state bits. Invariants: blocks [0, capacity) have been carved; every carved
 * block is live, on exactly one list, or (if pending) on the heap's delayed
 * list; used == live + pinned (unless in_full). Only the owning thread calls
 * these, except tes_page_set_delayed's CAS, which races with remote frees by
 * design. Called from heap.c, segment.c and free.c. */
#include "internal.h"

void tes_page_init(tes_page_t *page, tes_segment_t *seg, unsigned class_index, size_t block_size) {
  size_t page_size = (size_t)1 << seg->page_shift;
  page->area = (uint8_t *)seg + (size_t)page->index * page_size;
  page->block_size = block_size;
  page->class_index = (uint8_t)class_index;
  size_t block_bytes = page_size;
#if TES_SECURE
  page->divisor = tes_secure_divisors[class_index];
  /* The segment's last OS page is a guard (tes_secure_guard_segment). */
  if (page->index == seg->page_count - 1 && tes_secure_end_guard()) block_bytes -= tes_os_page_size();
#endif
  page->reserved = (uint32_t)(block_bytes / block_size);
  tes_page_capacity_set(page, 0);
  page->free = NULL;
  page->local_free = NULL;
  page->used = 0;
  atomic_store_explicit(&page->xthread_free, 0, memory_order_relaxed);
  page->installed = 0;
  page->remote_collected = 0;
  page->corrupt_link = NULL;
  page->live_base = 0;
  tes_page_set_bin(page, &tes_bin_closed); /* until a heap takes the page; before in_use (tes_heap_visit) */
  /* Release: a walk of another thread's heap that reads it with acquire
   * sees the geometry above (heap_visit.c, page_snapshot). A plain store on
   * x86 and a store-release on arm64, on the page's setup only. */
  __atomic_store_n(&page->in_use, 1, __ATOMIC_RELEASE);
  page->pinned = 0;
  page->in_full = 0;
  page->kept_empty = 0;
  page->free_is_zero = 0;
  page->next = page->prev = NULL;
#if TES_SECURE
  tes_secure_page_init(page);
#endif
  if (page->purged) {
    tes_purge_note_retake(page->purge_expire, page_size); /* purged, and wanted again: how soon? */
    page->purged = 0;
    seg->purged_bytes -= page_size;
    tes_os_commit_note((int64_t)page_size);
  }
}

bool tes_page_extend(tes_page_t *page) {
  if (page->capacity >= page->reserved) return false;
  size_t bs = page->block_size;
  size_t count = tes_page_extend_bytes(page) / bs;
  size_t min = tes_page_extend_min_blocks(bs);
  if (count < min) count = min;
  if (count > page->reserved - page->capacity) count = page->reserved - page->capacity;
  uint8_t *start = page->area + (size_t)page->capacity * bs;
#if TES_SECURE
  /* Randomised allocation order: link the new blocks in a shuffled order. */
  tes_block_t *first = NULL;
  tes_secure_shuffle(page, &first, count);
  (void)start;
#else
  tes_block_t *first = (tes_block_t *)start;
  uint8_t *p = start;
  for (size_t i = 0; i + 1 < count; i++, p += bs) ((tes_block_t *)p)->next = (tes_block_t *)(p + bs);
  ((tes_block_t *)p)->next = page->free;
#endif
  page->free = first;
  page->free_is_zero = page->mem_zero;
  tes_page_capacity_set(page, page->capacity + count); /* read by other threads' frees */
  page->installed += count;
  return true;
}

#if TES_SECURE
/* tes_block_next_checked cut a list of the page at this block: its link had
 * been overwritten after its free. The blocks after it are lost, never
 * handed out twice. Reported (and aborts by default) off the fast path. */
static void report_corrupt_link(tes_page_t *page) {
  if (tes_unlikely(page->corrupt_link != NULL)) {
    const void *at = page->corrupt_link;
    page->corrupt_link = NULL;
    tes_report_error(TES_ERR_CORRUPT, at, page);
  }
}
#endif

static size_t page_collect(tes_page_t *page);

/* Collect, and report a link found overwritten before or during it (the
 * walk of the remote stack below can find one: reported here, not at the
 * next collect, which never comes when the caller retires the page at
 * once, as thread exit and adoption do). */
size_t tes_page_collect(tes_page_t *page) {
#if TES_SECURE
  report_corrupt_link(page);
  size_t remote = page_collect(page);
  report_corrupt_link(page);
  return remote;
#else
  return page_collect(page);
#endif
}

#if TES_SECURE
/* Error path of remote_list_checked: the stack's blocks past the one the
 * owner freed too, `lost` of them, whose chain started at that block's
 * link (overwritten by the owner's push). They still carry the remote
 * freer's tag and their own links, so the page is searched (its carved
 * blocks, at most 4,096): among the blocks with that tag and on none of
 * the page's lists (nor in `kept`, the part of the stack already taken),
 * a chain head is one no other such block links to; its chain must run
 * through `lost` such blocks to the stack's NULL end. Exactly one head
 * doing so is the lost chain: returned (*tail: its last block). Anything
 * else (two chains would do, none does: a damaged block among them)
 * returns NULL: those blocks stay out, as before, rather than risk
 * handing one out twice. What can still mislead it takes three faults at
 * once: the lost chain damaged, its count 1, and another thread's free
 * into this page's empty stack caught between its tag and its push. */
enum { REST_MAX = 4096 };
static inline bool rest_has(const uint64_t *set, size_t i) { return (set[i / 64] >> (i % 64)) & 1; }
static inline tes_block_t *rest_block(const tes_page_t *page, size_t i) {
  return (tes_block_t *)(page->area + i * page->block_size);
}
/* The index of a carved block start b, or SIZE_MAX. */
static size_t rest_index(const tes_page_t *page, const tes_block_t *b) {
  size_t i;
  return b != NULL && tes_secure_block_index(page, b, &i) && i < page->capacity ? i : SIZE_MAX;
}
static void rest_unmark(const tes_page_t *page, uint64_t *set, const tes_block_t *b) {
  size_t i;
  for (size_t limit = page->capacity; limit-- > 0 && (i = rest_index(page, b)) != SIZE_MAX; b = tes_block_next(page, b))
    set[i / 64] &= ~((uint64_t)1 << (i % 64));
}
static tes_block_t *remote_rest_find(tes_page_t *page, const tes_block_t *kept, size_t lost, tes_block_t **tail) {
  static_assert(((size_t)1 << TES_SMALL_PAGE_SHIFT) / 16 <= REST_MAX, "a small page's blocks fit the sets");
  size_t capacity = page->capacity;
  if (lost == 0 || capacity > REST_MAX) return NULL;
  uint64_t tagged[REST_MAX / 64] = {0}, linked[REST_MAX / 64] = {0};
  bool small = page->block_size <= TES_SMALL_BLOCK_MAX;
  for (size_t i = 0; i < capacity; i++) {
    uint32_t word;
    memcpy(&word, tes_secure_size_word_in(page, rest_block(page, i), small), sizeof word);
    if (word == TES_FREED_TAG32_REMOTE) tagged[i / 64] |= (uint64_t)1 << (i % 64);
  }
  rest_unmark(page, tagged, page->free);
  rest_unmark(page, tagged, page->local_free);
  rest_unmark(page, tagged, kept);
  /* and the blocks other threads pushed since the stack was taken */
  rest_unmark(page, tagged, tes_tf_list(atomic_load_explicit(&page->xthread_free, memory_order_acquire)));
  for (size_t i = 0; i < capacity; i++) { /* what the tagged blocks link to */
    size_t j = rest_has(tagged, i) ? rest_index(page, tes_block_next(page, rest_block(page, i))) : SIZE_MAX;
    if (j != SIZE_MAX) linked[j / 64] |= (uint64_t)1 << (j % 64);
  }
  tes_block_t *found = NULL;
  for (size_t i = 0; i < capacity; i++) {
    if (!rest_has(tagged, i) || rest_has(linked, i)) continue;
    tes_block_t *b = rest_block(page, i), *last = NULL;
    size_t n = 0, j;
    for (; n < lost && (j = rest_index(page, b)) != SIZE_MAX && rest_has(tagged, j); n++) {
      last = b;
      b = tes_block_next(page, b);
    }
    if (n != lost || b != NULL) continue;
    if (found != NULL) return NULL; /* two chains would do: neither is sure */
    found = rest_block(page, i);
    *tail = last;
  }
  return found;
}

/* The cut, out of line (the walk keeps its registers): the kept part
 * (list .. prev, or none) ends at prev, then the lost chain follows if
 * remote_rest_find finds it. The list's head and tail after it. */
typedef struct {
  tes_block_t *head, *tail;
} rest_list_t;
static TES_NOINLINE rest_list_t remote_rest_splice(tes_page_t *page, tes_block_t *list, tes_block_t *prev,
                                                   size_t lost) {
  if (prev != NULL) tes_block_set_next(page, prev, NULL);
  tes_block_t *rest_tail, *rest = remote_rest_find(page, list, lost, &rest_tail);
  if (rest == NULL) return (rest_list_t){list, prev};
  if (prev == NULL) return (rest_list_t){rest, rest_tail};
  tes_block_set_next(page, prev, rest);
  return (rest_list_t){list, rest_tail};
}

/* The remote stack just taken, `*count` blocks: every block must carry the
 * remote freer's tag (tes_secure_remote_block_ok). At one the owner freed
 * too at the same moment (reported there) the list ends: that block is on
 * the local list already, or handed out again from it, and its link is the
 * owner's or the program's now: the blocks after it are found again by
 * remote_rest_find (twentieth session; before, they were lost until the
 * page retired), or else left out, never handed out twice; it leaves the
 * count. At most *count steps (a block
 * pushed twice makes a cycle); a link found overwritten cuts the list too
 * (tes_block_next_checked, reported by tes_page_collect). *tail: the
 * list's last block, or NULL. One load of each block's size word: the
 * owner now walks the stack it used to splice whole (RELIABILITY.md,
 * eighteenth session, for the cost). */
TES_INLINE tes_block_t *remote_list_walk(tes_page_t *page, tes_block_t *list, size_t *count,
                                         tes_block_t **tail, bool small) {
  tes_block_t *prev = NULL, *b = list;
  for (size_t n = 0, limit = *count; b != NULL && n < limit; n++) {
    if (tes_unlikely(!tes_secure_remote_block_ok(page, b, small))) {
      (*count)--;
      rest_list_t kept = remote_rest_splice(page, prev == NULL ? NULL : list, prev, limit - n - 1);
      list = kept.head;
      prev = kept.tail;
      break;
    }
    prev = b;
    b = tes_block_next_checked(page, b);
  }
  /* The end, written always: after a cut (a bad block, a link found
   * overwritten, the count reached) the tail's link must not lead on, or
   * the pop that reaches it reports the same link again. */
  if (prev != NULL) tes_block_set_next(page, prev, NULL);
  *tail = prev;
  return list;
}

/* Two copies of the walk: a small page's (the size word at the block's
 * end, no compare a block) and a medium page's. */
static tes_block_t *remote_list_checked(tes_page_t *page, tes_block_t *list, size_t *count, tes_block_t **tail) {
  if (page->block_size <= TES_SMALL_BLOCK_MAX) return remote_list_walk(page, list, count, tail, true);
  return remote_list_walk(page, list, count, tail, false);
}
#endif

#if !TES_SECURE
/* remote_list_end's error path: the remote stack just taken does not run
 * through `*count` blocks to NULL. Walked again, each block checked to be
 * a carved block start of the page, met once (a bitmap of at most 4,096
 * blocks on the stack; a medium page has fewer). The first fault ends the
 * list, reported:
 *  - a block met again: freed twice by other threads with other frees
 *    between (its second push linked it to the head above it, a cycle);
 *    reported as the double free it is, the list ends before the repeat,
 *    and the blocks under its first place (their chain began at its
 *    overwritten link) are lost;
 *  - a link that leaves the page's carved blocks, or NULL too soon: the
 *    block it is in was freed by its owner too, after this free (its link
 *    now the owner's bin's or local list's), or written after its free;
 *    reported as a double free (or a write after free), and that block is
 *    left out with the blocks after it: it is on the owner's list or bin,
 *    linked twice otherwise.
 * Left-out blocks keep counting in the page's `used` (a leak, never a
 * block handed out twice). Returns the list's last block (NULL: none
 * kept); *list and *count are what is kept. */
static TES_NOINLINE tes_block_t *remote_list_cut(tes_page_t *page, tes_block_t **list, size_t *count) {
  enum { SEEN_MAX = 4096 };
  uint64_t seen[SEEN_MAX / 64] = {0};
  size_t bs = page->block_size, carved = page->capacity < SEEN_MAX ? page->capacity : SEEN_MAX;
  tes_block_t *before = NULL, *prev = NULL, *b = *list; /* before: prev's predecessor */
  size_t n = 0;
  for (;; n++) {
    size_t offset = (size_t)((uint8_t *)b - page->area), i = offset / bs;
    if (b != NULL && (uint8_t *)b >= page->area && offset % bs == 0 && i < carved) {
      if (seen[i / 64] & ((uint64_t)1 << (i % 64))) { /* met again: a cycle */
        tes_report_double_free(page, b);
        break;
      }
      if (n < *count) {
        seen[i / 64] |= (uint64_t)1 << (i % 64);
        before = prev;
        prev = b;
        b = b->next;
        continue;
      }
    }
    if (b == NULL && n == *count) return prev; /* not reached: remote_list_end found a fault */
    /* prev's link leaves the page, or ends too soon, or runs on past the
     * count: prev is left out */
    if (prev != NULL) tes_report_error(TES_ERR_BIN_DAMAGED, prev, page);
    prev = before;
    n--;
    break;
  }
  if (prev == NULL) *list = NULL;
  else prev->next = NULL;
  *count = prev == NULL ? 0 : n;
  return prev;
}

/* The default build's walk of a remote stack just taken: `*count` blocks
 * from `*list` to NULL, or remote_list_cut settles it. A block freed twice
 * by other threads with other frees between (tes_free_remote compares with
 * the head only) made the stack a cycle, and the owner handed it out again
 * and again (security.default_continue_after_double_free_remote_between:
 * 2,007 times in 4,096 mallocs). page_collect walks a stack of at most
 * TES_REMOTE_CHECK_MAX blocks, and any stack when both of the page's lists
 * hold blocks (the splice walked it then, unchecked: a cycle kept the
 * owner there for ever). Every stack walked cost bench_prodcons --threads
 * 2 1.23x the CPU time (A/A 1.00; 3% more instructions): the walk's loads,
 * one after another, miss on blocks the freeing thread wrote. */
#define TES_REMOTE_CHECK_MAX 8
TES_INLINE tes_block_t *remote_list_end(tes_page_t *page, tes_block_t **list, size_t *count) {
  /* Each block inside the page's carved blocks: a block its owner freed
   * too, into its bin, links to the bin's next block, or to the bin's end
   * (TES_BIN_END, whose link is NULL: the stack looked whole, and the
   * page's list then handed out that static as a block). */
  const uint8_t *area = page->area;
  size_t carved = (size_t)page->capacity * page->block_size;
  tes_block_t *tail = *list;
  for (size_t k = *count; k > 1 && tail != NULL && (size_t)((uint8_t *)tail - area) < carved; k--) tail = tail->next;
  if (tes_unlikely(tail == NULL || (size_t)((uint8_t *)tail - area) >= carved || tail->next != NULL))
    return remote_list_cut(page, list, count);
  return tail;
}
#endif

static size_t page_collect(tes_page_t *page) {
  size_t remote = 0;
  uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
  if (tes_tf_list(tf) != NULL) {
    while (!atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf, tf & TES_TF_MASK,
                                                  memory_order_acquire, memory_order_relaxed)) {
    }
    tes_block_t *list = tes_tf_list(tf);
    remote = tes_tf_count(tf);
#if TES_SECURE
    tes_block_t *tail;
    list = remote_list_checked(page, list, &remote, &tail);
#else
    /* Checked when the splice below walks it anyway (both lists hold
     * blocks), and when it is short; a long one is spliced unread. */
    tes_block_t *tail = NULL;
    if (remote <= TES_REMOTE_CHECK_MAX || (page->local_free != NULL && page->free != NULL))
      tail = remote_list_end(page, &list, &remote);
#endif
    page->used -= (uint32_t)remote;
    page->remote_collected += remote;
    /* Splice without walking the remote list (its blocks are in the freeing
     * threads' caches): it becomes local_free or free whole. Only when both
     * are taken is a walk needed, and then of the remote list. */
    if (page->local_free == NULL) {
      page->local_free = list;
    } else if (page->free == NULL) {
      /* local_free moves to free; it holds every carved block that is not
       * live, except the remote ones. */
      page->installed += page->capacity - tes_page_live(page) - remote;
#if TES_SECURE
      tes_block_t *last = page->local_free, *rest = tes_secure_hold_back(page, last, list);
      if (rest != NULL) {
        page->installed--;
        page->free = rest;
        page->free_is_zero = 0;
        page->local_free = last; /* the block freed last, then the remote ones */
        return remote;
      }
      /* local_free is one block (the one the last refill held back: a
       * page that only other threads free, the producer of a
       * producer/consumer pair, has nothing else there). It goes to free
       * in front of the remote ones, and the remote stack's head, freed
       * last, is the block held back. Before, free got that one block
       * and local_free the remote stack, so every other miss refilled the
       * page with one block (bench_prodcons --threads 8: 122,882 misses
       * against the default build's 68,113). Not after a link found
       * overwritten (the page reports it). */
      if (list != NULL && page->corrupt_link == NULL) {
        tes_block_t *more = tes_secure_hold_back(page, list, NULL);
        if (more != NULL) {
          tes_block_set_next(page, last, more);
          page->installed += remote - 1;
          page->free = last;
          page->free_is_zero = 0;
          page->local_free = list; /* the remote stack's head, alone */
          return remote;
        }
      }
#endif
      page->free = page->local_free;
      page->free_is_zero = 0;
      page->local_free = list;
      return remote;
    } else {
      if (tail != NULL) { /* the walk above found it */
        tes_block_set_next(page, tail, page->local_free);
        page->local_free = list;
      }
    }
  }
  tes_page_free_from_local(page); /* every carved block that is not live is now on local_free */
  return remote;
}

size_t tes_page_free_count(const tes_page_t *page) {
  size_t n = 0;
#if !TES_SECURE
  if (!page->in_full) {
    /* Every carved block not counted in used is on free or local_free, so
     * the two are walked in step and the shorter one gives the count: a
     * page retired with one long list cost a miss per block for the
     * statistics (mstress: 4% of the samples at 8 threads). The hardened
     * build walks free alone: a link found overwritten cuts a list there. */
    const tes_block_t *f = page->free, *l = page->local_free;
    for (; f != NULL && l != NULL; n++, f = f->next, l = l->next) {
    }
    return f == NULL ? n : page->capacity - tes_page_live(page) - n;
  }
  for (const tes_block_t *b = page->free; b != NULL; b = b->next) n++;
#else
  /* A link overwritten after its block's free (a write after free, which a
   * pop would report: tes_block_next_checked) ends the count, reported:
   * followed, it decoded to a wild address, and the fold of a retiring page
   * (malloc_trim, thread exit, kept pages retiring) died of SIGSEGV. A link
   * must be a carved block start (the one-multiply block test, exact for
   * any address: an index below capacity means an offset below the page's
   * size; before, any address among the carved blocks passed and the count
   * went on from data inside a block). At most `capacity` blocks (a cycle).
   * The multiply is not on the walk's critical path (the next load depends
   * on the link, not on the test); no multiply-free test exists for block
   * sizes that are not powers of two. */
  for (const tes_block_t *b = page->free, *next; b != NULL; b = next) {
    n++;
    next = tes_block_next(page, b);
    size_t index;
    if (next != NULL && (!tes_secure_block_index(page, next, &index) || index >= page->capacity || n >= page->capacity)) {
      tes_report_error(TES_ERR_CORRUPT, b, page);
      break;
    }
  }
#endif
  return n;
}

bool tes_page_take_if_empty(tes_page_t *page) {
  uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_acquire);
  if (tes_page_live(page) > tes_tf_count(tf)) return false;
#if TES_SECURE
  tes_page_collect(page); /* walks the remote stack with its link checks */
#else
  /* Every live block is on the stack (each one there is counted in used),
   * so no other free can come. The caller retires the page, which drops
   * its lists: they are emptied here, not spliced together (a walk of the
   * remote stack, lines in other threads' caches, when free and local_free
   * both held blocks), and the blocks left on free leave `installed`, so
   * the statistics count the same allocations. */
  page->installed -= tes_page_free_count(page);
  page->free = NULL;
  page->local_free = NULL;
  if (tes_tf_list(tf) != NULL) {
    while (!atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf, tf & TES_TF_MASK, memory_order_acquire,
                                                  memory_order_relaxed)) {
    }
    uint32_t remote = tes_tf_count(tf);
    page->used -= remote;
    page->remote_collected += remote;
  }
#endif
  return tes_page_live(page) == 0;
}

static bool list_contains(const tes_page_t *page, const tes_block_t *list, const tes_block_t *b) {
  size_t limit = page->capacity + 1; /* a corrupt (cyclic) list cannot hang us */
  for (; list != NULL && limit-- > 0; list = tes_block_next(page, list)) {
    if (list == b) return true;
    if ((const uint8_t *)list < page->area ||
        (const uint8_t *)list >= page->area + (size_t)page->reserved * page->block_size)
      return false;
  }
  return false;
}

bool tes_page_contains_free(const tes_page_t *page, const tes_block_t *b) {
  uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_acquire);
  return list_contains(page, page->free, b) || list_contains(page, page->local_free, b) ||
         list_contains(page, tes_tf_list(tf), b);
}

void tes_page_set_delayed(tes_page_t *page, uintptr_t state) {
  uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
  for (;;) {
    if ((tf & TES_TF_MASK) == TES_TF_FREEING) {
      /* A remote thread is handing a block to page->heap; let it finish. */
      tes_os_yield();
      tf = atomic_load_explicit(&page->xthread_free, memory_order_acquire);
      continue;
    }
    uintptr_t want = (tf & ~TES_TF_MASK) | state;
    if (atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf, want, memory_order_acq_rel,
                                              memory_order_acquire))
      return;
  }
}
