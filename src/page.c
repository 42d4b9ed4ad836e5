/* page.c — a page: a run of equal blocks and its three free lists.
 *
 * Owns: carving blocks lazily (TES_EXTEND_BYTES at a time, so a fresh page
 * touches only the memory it hands out), collecting the owner's local_free
 * and the remote xthread_free stack (hardened: the remote bitmap, whose
 * taking makes `used` drop) back onto `free`, and the delayed-free
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
#if TES_SECURE
  /* A retired page had its remote frees collected (but a bit a reported
   * double free left), and the bitmap's memory may hold anything from the
   * segment's earlier life (a large block's data): cleared. Read first: a
   * page of it never written maps the zero page, and stays uncommitted. */
  atomic_store_explicit(&page->remote_last, 0, memory_order_relaxed);
  _Atomic uint64_t *bits = tes_page_remote_bits(page);
  for (size_t w = 0, words = ((size_t)page->reserved + 63) / 64; w < words; w++)
    if (atomic_load_explicit(&bits[w], memory_order_relaxed) != 0)
      atomic_store_explicit(&bits[w], 0, memory_order_relaxed);
#endif
  page->installed = 0;
  page->remote_collected = 0;
  page->corrupt_link = NULL;
  page->live_base = 0;
  tes_page_set_bin(page, &tes_bin_closed); /* until a heap takes the page; before in_use (tes_heap_visit) */
  /* Release: a walk of another thread's heap that reads it with acquire
   * sees the geometry above (heap_visit.c, page_snapshot). A plain store on
   * x86 and a store-release on arm64, on the page's setup only. */
  __atomic_store_n(&page->in_use, 1, __ATOMIC_RELEASE);
#if !TES_SECURE
  atomic_store_explicit(&page->area_if_in_use, page->area, memory_order_relaxed);
#endif
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

#if TES_SECURE
static size_t page_collect_in(tes_page_t *page, bool every);
#define page_collect(page) page_collect_in(page, false)
#else
static size_t page_collect(tes_page_t *page);
#endif

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
/* The remote frees of the bitmap words that `summary` names (bit j: words
 * 2j and 2j + 1; all ones: every word, tes_page_take_if_empty), taken from
 * the page's bitmap and linked into a list (returned; *tail its last block,
 * or NULL). Every block's loads are independent of the others' (its size
 * word, its link), so their misses overlap: the stack this replaces was a
 * chain, one dependent miss a block (RELIABILITY.md, twenty-third to
 * twenty-fifth sessions). Each block must carry the remote freer's tag
 * (tes_secure_remote_block_ok): one the owner freed too at the same moment
 * (reported there) is left where the owner's free put it, and no other
 * block is lost with it. Its link must be the encoded NULL its freer wrote:
 * else it was written after its free (noted for tes_page_collect's report)
 * and is left out, counted as collected, never handed out. The block freed
 * last (remote_last) goes first: the block held back at the next refill
 * (tes_secure_hold_back), as the stack's head was. *collected: the blocks
 * that leave `used` (every bit taken but the refused ones: a bit is taken
 * once, so `used` never drops below the live blocks). */
TES_INLINE tes_block_t *remote_bits_take(tes_page_t *page, uint32_t summary, size_t *collected, tes_block_t **tail,
                                         unsigned kind) {
  _Atomic uint64_t *bits = tes_page_remote_bits(page);
  size_t words = ((size_t)page->capacity + 63) / 64, taken = 0, refused = 0;
  size_t last = (size_t)atomic_load_explicit(&page->remote_last, memory_order_relaxed) - 1;
  /* Copies the compiler keeps in registers: the links stored below may
   * alias the page for all it knows (the loop is ~20 instructions a block,
   * security.remote_refill_budget). */
  size_t block_size = page->block_size;
  uint8_t *area = page->area;
  uintptr_t keys[2] = {page->keys[0], page->keys[1]};
  /* The link every freer wrote (an encoded NULL): one compare a block. */
  uintptr_t null_link = tes_keyed_encode(keys, 0);
  size_t link_offset = kind == TES_KIND_SMALL ? 0 : block_size - 16; /* tes_block_link_slot_in */
  size_t word_offset = block_size - sizeof(uint32_t);                /* a small block's size word */
  /* Where the next block's link goes: the first one's into `first`, no
   * test a block for the list's start. */
  uintptr_t first = null_link, *link_at = &first;
  tes_block_t *head, *prev = NULL, *held = NULL;
  for (; summary != 0; summary &= summary - 1) {
    size_t w = (size_t)(unsigned)__builtin_ctz(summary) * 2;
    if (w >= words) break;
    for (size_t end = w + 2 < words ? w + 2 : words; w < end; w++) {
      if (atomic_load_explicit(&bits[w], memory_order_relaxed) == 0) continue; /* no locked exchange of nothing */
      uint64_t m = atomic_exchange_explicit(&bits[w], 0, memory_order_acquire);
      if (last / 64 == w && ((m >> (last % 64)) & 1)) { /* the block freed last: checked and linked at the end */
        m &= ~((uint64_t)1 << (last % 64));
        held = (tes_block_t *)(area + last * block_size);
        taken++;
      }
      for (; m != 0; m &= m - 1) {
        taken++; /* not a popcount: a call without -mpopcnt */
        uint8_t *b = area + (w * 64 + (size_t)(unsigned)__builtin_ctzll(m)) * block_size;
        uint32_t word;
        memcpy(&word, kind == TES_KIND_SMALL ? (uint32_t *)(b + word_offset) : tes_secure_size_word_in(page, b, kind),
               sizeof word);
        if (tes_unlikely(word != TES_FREED_TAG32_REMOTE)) { /* tes_secure_remote_block_ok, which reports */
          refused += !tes_secure_remote_block_ok(page, (tes_block_t *)b, kind == TES_KIND_SMALL);
          continue;
        }
        tes_block_t *slot = (tes_block_t *)(b + link_offset);
        if (tes_unlikely((uintptr_t)slot->next != null_link)) {
          page->corrupt_link = b;
          continue;
        }
        *link_at = tes_keyed_encode(keys, (uintptr_t)b);
        link_at = (uintptr_t *)slot;
      }
    }
  }
  head = (tes_block_t *)tes_keyed_decode(keys, first);
  if (link_at != &first) prev = (tes_block_t *)((uint8_t *)link_at - link_offset);
  if (held != NULL) {
    if (tes_unlikely(!tes_secure_remote_block_ok(page, held, kind == TES_KIND_SMALL))) {
      refused++;
    } else if (tes_unlikely((uintptr_t)tes_block_link_slot_in(page, held, kind)->next != null_link)) {
      page->corrupt_link = held;
    } else {
      tes_block_set_next_in(page, held, head, kind);
      head = held;
      if (prev == NULL) prev = held;
    }
  }
  if (prev != NULL) tes_block_set_next_in(page, prev, NULL, kind);
  *tail = prev;
  *collected = taken - refused;
  return head;
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

#if TES_SECURE
static size_t page_collect_in(tes_page_t *page, bool every) {
  size_t remote = 0;
  uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
  if (tes_tf_list(tf) != NULL || every) {
    /* The summary goes first (acquire): a freer's bit set before its
     * summary bit is in the words taken after (free.c). */
    while (tes_tf_list(tf) != NULL &&
           !atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf, tf & TES_TF_MASK, memory_order_acquire,
                                                  memory_order_relaxed)) {
    }
    uint32_t summary = every ? UINT32_MAX : tes_tf_summary(tf);
    tes_block_t *tail, *list;
    if (page->block_size <= TES_SMALL_BLOCK_MAX) list = remote_bits_take(page, summary, &remote, &tail, TES_KIND_SMALL);
    else list = remote_bits_take(page, summary, &remote, &tail, TES_KIND_MEDIUM);
#else
static size_t page_collect(tes_page_t *page) {
  size_t remote = 0;
  uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
  if (tes_tf_list(tf) != NULL) {
    while (!atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf, tf & TES_TF_MASK,
                                                  memory_order_acquire, memory_order_relaxed)) {
    }
    tes_block_t *list = tes_tf_list(tf);
    remote = tes_tf_count(tf);
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
#if TES_SECURE
  /* Every word, not only those the summary names: a freer may set its
   * bit after a collect took its summary bit (free.c), and no later free
   * into those words may come. Read first: the page cannot empty while
   * more of its blocks are live than bits are set. */
  (void)tf;
  if (tes_page_live(page) > tes_page_remote_pending(page, page->capacity)) return false;
  report_corrupt_link(page);
  page_collect_in(page, true);
  report_corrupt_link(page);
  return tes_page_live(page) == 0;
#else
  if (tes_page_live(page) > tes_tf_count(tf)) return false;
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
#if TES_SECURE
  /* Freed by another thread and not collected yet: its bit (b is a carved
   * block start: the verdict checked). */
  size_t i;
  bool remote = tes_secure_block_index(page, b, &i) &&
                (atomic_load_explicit(&tes_page_remote_bits(page)[i / 64], memory_order_acquire) >> (i % 64)) & 1;
  return remote || list_contains(page, page->free, b) || list_contains(page, page->local_free, b);
#else
  uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_acquire);
  return list_contains(page, page->free, b) || list_contains(page, page->local_free, b) ||
         list_contains(page, tes_tf_list(tf), b);
#endif
}

#ifdef TES_FAULT_INJECTION
#include "fault.h"
static _Atomic uint64_t freeing_waits;
uint64_t tes_fault_freeing_waits(void) { return atomic_load_explicit(&freeing_waits, memory_order_relaxed); }
#define FREEING_WAIT_COUNT() atomic_fetch_add_explicit(&freeing_waits, 1, memory_order_relaxed)
#else
#define FREEING_WAIT_COUNT() ((void)0)
#endif

/* Out of line: a remote freer preempted in its window is rare. */
void tes_page_wait_unfreeing(const tes_page_t *page) {
  while ((atomic_load_explicit(&page->xthread_free, memory_order_acquire) & TES_TF_MASK) == TES_TF_FREEING) {
    FREEING_WAIT_COUNT();
    tes_os_yield();
  }
}

void tes_page_set_delayed(tes_page_t *page, uintptr_t state) {
  uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
  for (;;) {
    if ((tf & TES_TF_MASK) == TES_TF_FREEING) {
      /* A remote thread is handing a block to page->heap; let it finish. */
      tes_page_wait_unfreeing(page);
      tf = atomic_load_explicit(&page->xthread_free, memory_order_acquire);
      continue;
    }
    uintptr_t want = (tf & ~TES_TF_MASK) | state;
    if (atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf, want, memory_order_acq_rel,
                                              memory_order_acquire))
      return;
  }
}
