/* large.c — blocks above the largest size class (128 KiB).
 *
 * Each large block has a segment of its own (unless it is packed with others,
 * TESSERA_LARGE_PACK, the default build's default: "Packed blocks" below): header at the segment start, the
 * block at large_offset (512 bytes, or the requested alignment), mapped to the
 * next power of two from 256 KiB up to 4 MiB, whole pages beyond
 * (mapping_size). (The hardened build places the block at the END of its segment
 * instead, right before the segment's guard page, so a fresh block costs no
 * mprotect; realloc grows a block within its segment by moving a guard page
 * of its own, and past it by growing the segment with its pages, as the
 * default build does, through tes_os_remap_guarded (the guard pages split
 * the mapping, which mremap moves only one piece at a time); only if that
 * fails is the block copied, to the front of a segment with room to grow,
 * where realloc also puts a block that leaves the medium classes: alloc.c.)
 * Freeing puts the segment into the shared segment cache (bounded,
 * purged after the purge delay), so repeated multi-megabyte alloc/free cycles
 * do not become mmap/munmap storms. realloc stays in place while the block
 * fits its segment and otherwise grows it with mremap (page tables move, no
 * bytes are copied). Large segments have thread id TES_TID_SHARED: any thread
 * frees them directly (no hand-off to the allocating thread). All large
 * segments are on one list (for tes_heap_visit and tes_heap_destroy) guarded
 * by large_lock. Called from heap.c (allocation), free.c and alloc.c.
 *
 * Freed large blocks: once freed, a block's segment leaves the segment map
 * (it is cached or unmapped), so a second free of it finds no owner. To name
 * that error "double free" rather than "invalid free", every large free
 * (and a realloc whose mremap moved the block, and tes_heap_destroy) records
 * the block's address and size in a ring of the last LARGE_FREED_RING large
 * frees: static storage, written under large_lock, which the free already
 * holds (no extra lock or atomic; fork handlers take that lock). The ring is
 * read only on the error path, for a pointer nobody owns
 * (tes_large_freed_before): an address in it was a large block that was
 * freed and has not been handed out again as a large block since (a live
 * block is owned and never reaches the ring). Older frees fall off the ring
 * and are again reported as "invalid free". */
#include "internal.h"

_Atomic int64_t tes_large_in_use, tes_large_in_use_peak;
_Atomic int64_t tes_large_blocks, tes_large_blocks_peak; /* live large blocks (glibc's hblks), and their peak */
static tes_lock_t large_lock = TES_LOCK_INIT;
tes_segment_t *tes_large_list;
/* Segments that realloc took off the list to mremap them (under
 * large_lock). While one is off the list, a walk would miss it: the walks
 * that change owners (tes_large_reassign: a heap's thread exits, or the heap
 * is deleted or destroyed) wait until none is. Without that, a block whose
 * owner exited during the mremap kept pointing at the dead heap's struct,
 * which tes_heap_new hands out again, and tes_heap_destroy of that new heap
 * then freed the block under its user. */
static unsigned large_moving;

/* The last large frees, oldest overwritten first (under large_lock). 256
 * entries, one 4 KiB page of BSS: a program must free 256 other large
 * blocks between the two frees of one for the second to read "invalid". */
#define LARGE_FREED_RING 256
static_assert((LARGE_FREED_RING & (LARGE_FREED_RING - 1)) == 0, "the index wraps by masking");
typedef struct large_freed_s {
  uintptr_t block; /* the address free was given */
  size_t size;     /* its usable bytes then, for the report */
} large_freed_t;
TES_BIG_BSS static large_freed_t freed_ring[LARGE_FREED_RING];
static unsigned freed_next;

#define LARGE_HEADER_BYTES (offsetof(tes_segment_t, pages) + sizeof(tes_page_t))
#define LARGE_MAX_SIZE ((size_t)1 << 46)
#define LARGE_TAIL_PURGE ((size_t)1 << 20) /* purge a reused segment's dirty tail beyond this */

/* Segments whose large block was placed in a cached segment with a dirty
 * tail of more than LARGE_TAIL_PURGE beyond it (hardened build: a dirty
 * front before it; purge_front), under
 * large_lock. The tail is purged one purge delay later if the block still
 * lives (tes_large_purge_tails, from the same places as the cache's purge).
 * Purging it at once cost a system call and, when the next larger block
 * took the segment, a page fault per page: large blocks of random sizes
 * cycling through the cache (64 KiB-2 MiB aligned, up to 3 MiB, 50 live)
 * made 3,100 madvise calls and 1.4 M page faults in 20,000 iterations,
 * 3.0 s of system time, against mimalloc's 0.07 s. A block freed before
 * then takes its tail with it to the cache, which purges idle segments. */
static tes_segment_t *tail_list;
static size_t tail_list_bytes; /* the tails' total (tail_link_locked bounds it) */
/* What the estimated tails' counts may fall short of their resident bytes:
 * their lengths less their counts (tail_count). At most
 * LARGE_TAILS_UNSURE_TIMES times the bound, so that what waits stays within
 * 1 + that many times the bound however wrong the estimate is (a tail that
 * would pass it is probed, tail_wait_or_purge). Without it a stale share
 * let written tails wait counted at a hundredth of their pages: 64 live
 * 200 KiB blocks in segments 3.9 MiB blocks had filled, the probed tails
 * sparse, kept 265 MB resident against 31 MB before the resident count.
 * Twice: random-live's tails, mostly unwritten, still wait (1,494 mincore
 * and 84 madvise calls, 39,000 faults, as without; once the bound made it
 * 10,369 / 839 / 63,000 and 2.3x the time). */
static size_t tail_list_unsure;
#define LARGE_TAILS_UNSURE_TIMES 2
static _Atomic int64_t tail_list_due = INT64_MAX; /* no later than the earliest tail_due on the list */
/* What waiting tails may hold in all: a quarter of the large blocks' bytes
 * in use, at least LARGE_TAILS_MIN. Beyond it a tail goes at once, as
 * before: RSS stays within a quarter of what large blocks use (RSS of the
 * churn that led to this: 172 -> 239 MB with no bound, 204 MB with 16 MiB;
 * system time 3.0 -> 0.1 and 1.4 s). */
#define LARGE_TAILS_MIN ((size_t)8 << 20)

/* tail_due while tes_large_purge_tails purges the tail with large_lock let
 * go (default build): off the list, and whoever is about to change or free
 * the block waits for 0 (tail_purge_wait) with no lock held. */
#define TAIL_PURGING INT64_MIN

static void tail_unlink_locked_to(tes_segment_t *seg, int64_t leave) {
  int64_t due = atomic_load_explicit(&seg->tail_due, memory_order_relaxed);
  if (due == 0 || due == TAIL_PURGING) return;
  if (seg->tail_prev) seg->tail_prev->tail_next = seg->tail_next;
  else tail_list = seg->tail_next;
  if (seg->tail_next) seg->tail_next->tail_prev = seg->tail_prev;
  seg->tail_next = seg->tail_prev = NULL;
  tail_list_bytes -= seg->tail_counted;
  if (seg->tail_estimated) tail_list_unsure -= seg->tail_bytes - seg->tail_counted;
  seg->tail_bytes = seg->tail_counted = 0;
  seg->tail_estimated = false;
  /* Release: a realloc that reads 0 without the lock (tail_cancel) sees
   * the purge's dirty_end and purged_bytes. */
  atomic_store_explicit(&seg->tail_due, leave, memory_order_release);
}
static void tail_unlink_locked(tes_segment_t *seg) { tail_unlink_locked_to(seg, 0); }

/* No lock held: the block's tail is not being purged (any more). */
static TES_NOINLINE void tail_purge_wait_out(tes_segment_t *seg) {
  while (atomic_load_explicit(&seg->tail_due, memory_order_acquire) == TAIL_PURGING) tes_os_yield();
}
static inline void tail_purge_wait(tes_segment_t *seg) {
  if (tes_unlikely(atomic_load_explicit(&seg->tail_due, memory_order_acquire) == TAIL_PURGING))
    tail_purge_wait_out(seg);
}

/* The waiting memory of seg ([tail_from, tail_from + tail_bytes), set by
 * the caller) goes on the list, counted in the pending total as `counted`
 * bytes (tail_count: its resident bytes, or an estimate of them). False
 * when the total would pass its bound (the caller purges it now). */
static bool tail_link_locked(tes_segment_t *seg, int64_t due, size_t counted, bool estimated) {
  int64_t in_use = atomic_load_explicit(&tes_large_in_use, memory_order_relaxed);
  size_t most = in_use > 0 ? (size_t)in_use / 4 : 0;
  if (most < LARGE_TAILS_MIN) most = LARGE_TAILS_MIN;
  if (tail_list_bytes + counted > most) return false;
  size_t unsure = estimated && seg->tail_bytes > counted ? seg->tail_bytes - counted : 0;
  if (tail_list_unsure + unsure > most * LARGE_TAILS_UNSURE_TIMES) return false;
  tail_list_bytes += counted;
  tail_list_unsure += unsure;
  seg->tail_counted = counted;
  seg->tail_estimated = unsure != 0;
  atomic_store_explicit(&seg->tail_due, due, memory_order_relaxed);
  seg->tail_prev = NULL;
  seg->tail_next = tail_list;
  if (tail_list) tail_list->tail_prev = seg;
  tail_list = seg;
  if (due < atomic_load_explicit(&tail_list_due, memory_order_relaxed))
    atomic_store_explicit(&tail_list_due, due, memory_order_relaxed);
  return true;
}

int64_t tes_large_tail_due(void) { return atomic_load_explicit(&tail_list_due, memory_order_relaxed); }

void tes_large_lock(void) { tes_lock(&large_lock); }
#ifdef TES_FAULT_INJECTION
bool tes_large_lock_mine(void) { return tes_lock_mine(&large_lock); }
#endif
TES_COLD void tes_large_unlock(bool child) {
  if (child) {
    large_moving = 0; /* the threads that were moving blocks do not exist in the child */
    /* Nor does one purging a tail with the lock let go: its block's free
     * would wait for it for ever (the tail stays dirty, as if not due). */
    for (tes_segment_t *seg = tes_large_list; seg != NULL; seg = seg->next)
      if (atomic_load_explicit(&seg->tail_due, memory_order_relaxed) == TAIL_PURGING)
        atomic_store_explicit(&seg->tail_due, 0, memory_order_relaxed);
    tes_lock_reset(&large_lock);
  } else {
    tes_unlock(&large_lock);
  }
}

/* Under large_lock, which every change of the gauges holds (it is taken
 * anyway to list or unlist the block), so they need no atomic
 * read-modify-write: each such instruction is a full barrier, which made the
 * large free wait for the program's own pending stores (sampled in `mixed`:
 * 13% of its time on one lock xadd). Readers load them atomically. Inline:
 * four calls a large malloc+free cycle. */
TES_INLINE void gauge_add_locked(_Atomic int64_t *gauge, _Atomic int64_t *peak, int64_t delta) {
  int64_t now = atomic_load_explicit(gauge, memory_order_relaxed) + delta;
  atomic_store_explicit(gauge, now, memory_order_relaxed);
  if (now > atomic_load_explicit(peak, memory_order_relaxed)) atomic_store_explicit(peak, now, memory_order_relaxed);
}
/* Usable bytes and count of live large blocks (glibc's hblkhd and hblks). */
static void in_use_add_locked(int64_t bytes, int64_t blocks) {
  gauge_add_locked(&tes_large_in_use, &tes_large_in_use_peak, bytes);
  if (blocks != 0) gauge_add_locked(&tes_large_blocks, &tes_large_blocks_peak, blocks);
}
static void in_use_add(int64_t delta) {
  tes_lock(&large_lock);
  in_use_add_locked(delta, 0);
  tes_unlock(&large_lock);
}

static size_t round_up(size_t x, size_t to) { return (x + to - 1) & ~(to - 1); }

/* The committed gauge for a large segment in use: bytes purged behind (or
 * in front of) its block leave it (seg->purged_bytes counts them), and
 * count again once the block may grow over them or the mapping changes
 * size (tes_os_remap moves the gauge by the whole difference). Before,
 * `committed` (and mallinfo2's arena) kept whole purged tails. */
static void note_purged(tes_segment_t *seg, size_t bytes) {
  tes_os_commit_note(-(int64_t)bytes);
  seg->purged_bytes += bytes;
}
static void note_unpurged(tes_segment_t *seg) {
  if (seg->purged_bytes == 0) return;
  tes_os_commit_note((int64_t)seg->purged_bytes);
  seg->purged_bytes = 0;
}
#if TES_SECURE
/* The same for a live block's segment in the hardened build, whose owner
 * changes the block (realloc in place, its discard before a free) while
 * the dirty front in front of the block may wait on the tail list: any
 * thread's tes_large_purge_tails then purges it (purge_front) and adds to
 * purged_bytes under large_lock, so the owner's read-modify-writes of
 * purged_bytes take the lock too while the front waits (unlocked, one of
 * the two updates was lost and `committed` drifted for good; TSan saw the
 * race). tail_due is 0 once the front is off the list (the release store
 * of tail_unlink_locked makes the purge's count visible) and stays 0 while
 * the block lives, so a segment with no front waiting takes no lock. The
 * default build takes its tail off the list first instead (tail_cancel),
 * since its purge would run into a grown block. */
static bool front_lock(tes_segment_t *seg) {
  if (atomic_load_explicit(&seg->tail_due, memory_order_acquire) == 0) return false;
  tes_lock(&large_lock);
  return true;
}
static void note_purged_live(tes_segment_t *seg, size_t bytes) {
  bool locked = front_lock(seg);
  note_purged(seg, bytes);
  if (locked) tes_unlock(&large_lock);
}
static void note_unpurged_live(tes_segment_t *seg) {
  bool locked = front_lock(seg);
  note_unpurged(seg);
  if (locked) tes_unlock(&large_lock);
}
#else
/* realloc took the tail off the list first (tail_cancel): no other writer. */
static void note_unpurged_live(tes_segment_t *seg) { note_unpurged(seg); }
#endif
/* A segment from the cache, taken for a block over [start, end): it comes
 * back with `purged` bytes purged at its tail (purge_cached keeps only the
 * first page); the part the block covers counts as committed again, the
 * rest stays purged (all of it counted again: a 4 MiB cached segment taken
 * by a 200 KiB block counted 4 MiB). */
static void recommit_span(tes_segment_t *seg, size_t purged, size_t start, size_t end) {
  size_t page = tes_os_page_size();
  size_t lo = start & ~(page - 1), hi = round_up(end, page);
  if (lo < seg->size - purged) lo = seg->size - purged;
  if (hi > seg->size) hi = seg->size;
  size_t back = hi > lo ? hi - lo : 0;
  tes_os_commit_note((int64_t)back);
  seg->purged_bytes = purged - back;
}

/* The mapping of a large block that needs `need` bytes from its segment's
 * start: the next power of two from 256 KiB up to the 4 MiB unit, whole OS
 * pages beyond. Each used to take whole units: 20,000 blocks of 200 KiB
 * reserved 80 GB of address space (RLIMIT_AS and overcommit mode 2 stopped
 * malloc at a tenth of what glibc serves). Powers of two keep it within 2x
 * and give a few sizes for the segment cache to match (tes_cache_take
 * prefers the exact one: with that, `mixed` makes 522 mmap/munmap/madvise
 * calls a run, 361 when every segment was a unit, 691 without it).
 * Segments still start on a unit. */
static size_t mapping_size(size_t need) {
  if (need > TES_SEGMENT_SIZE) return round_up(need, tes_os_page_size());
  size_t size = (size_t)256 << 10;
  while (size < need) size <<= 1;
  return size;
}

#if !TES_SECURE
/* Usable bytes of a large block of `size`: whole OS pages. */
static size_t block_usable(size_t size) {
  size_t usable = round_up(size, tes_os_page_size());
  return usable == 0 ? tes_os_page_size() : usable; /* aligned_alloc(big, 0) still gets a block */
}
#endif

static void list_insert_locked(tes_segment_t *seg) {
  seg->prev = NULL;
  seg->next = tes_large_list;
  if (tes_large_list) tes_large_list->prev = seg;
  tes_large_list = seg;
}

/* A new block: listed, and its usable bytes counted in use; its dirty
 * tail (seg->tail_from, tail_bytes) to purge at `tail_due` (0: none),
 * counted as `counted` bytes, goes on the tail list if there is room
 * (false: the caller sees to it, tail_wait_or_purge). */
static bool list_insert(tes_segment_t *seg, int64_t usable, int64_t tail_due, size_t counted, bool estimated) {
  tes_lock(&large_lock);
  list_insert_locked(seg);
  bool waits = tail_due != 0 && tail_link_locked(seg, tail_due, counted, estimated);
  in_use_add_locked(usable, 1);
  tes_unlock(&large_lock);
  return waits;
}

/* Under large_lock: p (a block of `size` usable bytes) was just freed. */
static void freed_record_locked(const void *p, size_t size) {
  large_freed_t *slot = &freed_ring[freed_next++ & (LARGE_FREED_RING - 1)];
  slot->block = (uintptr_t)p;
  slot->size = size;
}

bool tes_large_freed_before(const void *p, size_t *size) {
  if (p == NULL) return false; /* the ring's unused slots hold 0 */
  bool found = false;
  tes_lock(&large_lock);
  /* Newest first: the size at the last free of p. */
  for (unsigned i = 1; i <= LARGE_FREED_RING && !found; i++) {
    const large_freed_t *slot = &freed_ring[(freed_next - i) & (LARGE_FREED_RING - 1)];
    if (slot->block == (uintptr_t)p) {
      *size = slot->size;
      found = true;
    }
  }
  tes_unlock(&large_lock);
  return found;
}

static void list_remove_locked(tes_segment_t *seg) {
  tail_unlink_locked(seg); /* freed, released or remapped: no tail to purge later */
  if (seg->prev) seg->prev->next = seg->next;
  else tes_large_list = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
  seg->next = seg->prev = NULL;
}

#if !TES_SECURE
/* Give back the dirty memory beyond `keep` bytes from the segment start. */
static void purge_tail(tes_segment_t *seg, size_t keep) {
  size_t page = tes_os_page_size();
  keep = round_up(keep, page);
  if (seg->dirty_end > keep + LARGE_TAIL_PURGE) {
    size_t len = round_up(seg->dirty_end, page) - keep;
    if (tes_os_purge((uint8_t *)seg + keep, len, true)) {
      seg->dirty_end = keep;
      note_purged(seg, len);
    }
  }
}
#endif

#if TES_SECURE
/* The hardened build's waiting front: [tail_from, tail_from + bytes),
 * all of it below the block, which keeps its start while it lives. */
static void purge_front(tes_segment_t *seg, size_t bytes) {
  if (tes_os_purge((uint8_t *)seg + seg->tail_from, bytes, true)) {
    note_purged(seg, bytes);
    /* So that the next block in this segment does not purge it again (as
     * the purge at once did: below the front nothing is read as zero that a
     * block placed at the segment's end could reach without clearing). */
    size_t end = seg->tail_from + bytes;
    if (seg->clean_below < end) seg->clean_below = end;
  }
}
#endif

/* What a reused segment's block leaves dirty and waits on the tail list:
 * the tail behind the block (default build) or the front of front_bytes
 * before it (hardened build: seg->tail_bytes, which the caller sets before
 * the front is listed or purged). Under large_lock, or before the block is
 * out. */
static void purge_waiting(tes_segment_t *seg, size_t front_bytes) {
#if TES_SECURE
  /* The front lies below the block, which a realloc grows or shrinks at
   * its end only (moving it to a new mapping takes it off this list). */
  purge_front(seg, front_bytes);
#else
  /* The block's size cannot change under us: a realloc takes it off this
   * list under large_lock first (tail_cancel). */
  (void)front_bytes;
  purge_tail(seg, seg->large_offset + seg->pages[0].block_size);
#endif
}

/* What a waiting tail counts in the pending total. Its length says how far
 * earlier blocks reached, not what they wrote: a program that writes only a
 * block's ends leaves most of a tail never resident, and counted by length
 * the tails passed their bound and were purged at once for pages that were
 * not there, and the few that were faulted in again when a longer block
 * took the segment (64 live blocks of random sizes 128 KiB-4 MiB, two bytes
 * written each: 5,776 madvise calls and 80,000 page faults in 100,000
 * cycles). mincore says what is resident, but costs a system call as the
 * purge did (one for every tail: 42,000 calls, slower than the purges), so
 * every TAIL_PROBE_EVERY-th tail is counted by mincore and the others by
 * their length times the share of the probed tails' bytes that were
 * resident (TAIL_SHARE_ONE: all, as before; each probe moves it a quarter
 * of the way to what it found). A tail that does not fit so is probed (if
 * it was not) and purged at once only if its resident bytes do not fit
 * either. A program that writes its blocks keeps the share near one and
 * the bound as it was; pages swapped out are not counted (they hold no RAM)
 * but are purged when due. The counter and the share are read and written
 * without a lock: a lost update only moves a probe or an estimate. */
#define TAIL_PROBE_EVERY 32
#define TAIL_SHARE_ONE 256
static _Atomic unsigned tail_resident_share = TAIL_SHARE_ONE, tails_counted;

/* The tail's resident bytes (SIZE_MAX: mincore failed), and the share updated. */
static size_t tail_probe(tes_segment_t *seg) {
  size_t pages = tes_os_resident_pages((uint8_t *)seg + seg->tail_from, seg->tail_bytes);
  if (pages == SIZE_MAX) return SIZE_MAX;
  size_t resident = pages * tes_os_page_size();
  unsigned found = (unsigned)(resident * TAIL_SHARE_ONE / seg->tail_bytes);
  unsigned share = atomic_load_explicit(&tail_resident_share, memory_order_relaxed);
  atomic_store_explicit(&tail_resident_share, (3 * share + found + 3) / 4, memory_order_relaxed);
  return resident;
}

/* What the new tail of seg counts; *probed: by mincore. */
static size_t tail_count(tes_segment_t *seg, bool *probed) {
  unsigned n = atomic_load_explicit(&tails_counted, memory_order_relaxed);
  atomic_store_explicit(&tails_counted, n + 1, memory_order_relaxed);
  if (n % TAIL_PROBE_EVERY == 0) {
    size_t resident = tail_probe(seg);
    *probed = resident != SIZE_MAX;
    if (*probed) return resident;
  }
  size_t share = atomic_load_explicit(&tail_resident_share, memory_order_relaxed);
  return round_up(seg->tail_bytes / TAIL_SHARE_ONE * share, tes_os_page_size());
}

/* The tail did not fit counted by tail_count: counted by mincore (if it
 * was not), it waits if that fits, else it is purged now. Before the block
 * is out. */
static void tail_wait_or_purge(tes_segment_t *seg, int64_t due, bool probed) {
  size_t resident = probed ? SIZE_MAX : tail_probe(seg);
  if (resident != SIZE_MAX) {
    tes_lock(&large_lock);
    bool waits = tail_link_locked(seg, due, resident, false);
    tes_unlock(&large_lock);
    if (waits) return;
  }
  purge_waiting(seg, seg->tail_bytes);
}

/* When that memory is due: one purge delay from now (never 0, which means
 * none pending). */
static int64_t waiting_due(void) {
  int64_t now = tes_os_clock_ms();
  int64_t due = now + tes_purge_delay(now);
  return due > 0 ? due : 1;
}

#ifdef TES_FAULT_INJECTION
#include "fault.h"
void (*volatile tes_fault_pack_gap)(void); /* both builds' fault tests link it; only the default build packs */
#endif
#if !TES_SECURE
/* Packed blocks: a large block of up to PACK_MAX bytes (from its segment's
 * start: header and block) is carved from a shared 4 MiB unit, a "host",
 * in runs of 64 KiB granules, instead of a segment of its own. Each block
 * still has a segment header of its own at the start of its run
 * (seg->size is the run), so everything that takes a large block's segment
 * works unchanged; the host's unit is TES_UNIT_HOST in the segment map, and
 * tes_segment_find reads the block's run start from the host's table.
 * Granule 0 holds the host's headers. Hosts are 4 MiB segments taken from
 * the segment cache (exactly a unit: what emptied small and medium segments
 * leave there) or mapped; an empty host stays as a spare (PACK_SPARES) or
 * goes back to the cache. Freed runs
 * stay dirty for one purge delay, then are purged (tes_large_purge_tails).
 * Such blocks do not grow with mremap: realloc moves one that outgrows its
 * run (to a segment of its own once it is larger than PACK_MAX).
 * `footprint` (64 KiB-1 MiB blocks after its medium phase): one segment a
 * block mapped 44 MB of new segments in that phase while 48 MB that the
 * medium blocks left sat in the cache; packed, the phase makes 4,200 page
 * faults instead of 13,800. On by default since the twenty-fifth session
 * (TESSERA_LARGE_PACK=0 for a segment a block): `footprint` peaked 2%
 * higher packed (124.6 against 121.9 MB, 7 runs; its large phase started
 * while the small and medium memory it freed before was still resident)
 * until a large block written in fresh memory purged the heap's retired
 * pages first (purge_for_large_growth): 116 MB packed, 117-133 MB with a
 * segment a block; `mixed`, 68 MB packed against 62 MB until the spares
 * below, is now 57-58 MB (docs/PERFORMANCE.md, twentieth, twenty-first and
 * twenty-fifth sessions). */
#define PACK_GRANULE_SHIFT TES_PACK_GRANULE_SHIFT
#define PACK_GRANULE ((size_t)1 << PACK_GRANULE_SHIFT)
#define PACK_MAX ((size_t)1 << 20)
#define PACK_ALL TES_PACK_ALL
static_assert((TES_SEGMENT_SIZE >> PACK_GRANULE_SHIFT) == 64, "one bit a granule in a 64-bit mask");
/* The host's table (internal.h): where its blocks start, which granules are
 * free, dirty, purged and aging, and when the aging ones are purged. */
typedef tes_pack_host_t pack_host_t;
static_assert(TES_LARGE_OFFSET + sizeof(pack_host_t) <= 4096, "the host's table is in its first OS page");
static_assert(offsetof(pack_host_t, starts) == 0, "tes_packed_segment_of reads it at TES_LARGE_OFFSET");
static pack_host_t *hosts, *hosts_last;
/* Up to PACK_SPARES empty hosts stay (on `hosts`) rather than going to the
 * cache; beyond, the oldest goes. Their dirty granules are purged like any
 * host's (once free for a delay, precisely), and a forced purge sends them
 * all to the cache (tes_large_purge_tails). With one spare, `mixed` sent a
 * host to the cache and took one back about 1,060 times a run: each went
 * with all its granules counted dirty and resident until the cache's
 * delay (4 empty hosts held 14 MB at the peak: 68 MB against 62 MB with a
 * segment a block), or, purged on the way (at the cost of the dirty memory
 * footprint reuses), came back to be faulted in again (44 MB but 54,000
 * faults against 17,500). With 8: 19 trips, 58 MB and 14,400 faults. */
#define PACK_SPARES 8
static unsigned spares; /* empty hosts on `hosts` */
/* Under large_lock; stored atomically, since tes_large_spare_to_cache
 * peeks at it without the lock (ThreadSanitizer). */
static void spares_add(int delta) { __atomic_store_n(&spares, spares + (unsigned)delta, __ATOMIC_RELAXED); }

static pack_host_t *host_table(tes_segment_t *host) { return tes_pack_host_table(host); }
static tes_segment_t *host_of(pack_host_t *h) { return (tes_segment_t *)((uint8_t *)h - TES_LARGE_OFFSET); }
static bool packed_segment(const tes_segment_t *seg) { return ((uintptr_t)seg & TES_SEGMENT_MASK) != 0; }
static uint64_t run_mask(unsigned first, unsigned count) {
  return (count >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << count) - 1)) << first;
}


/* Under large_lock: give back h's free dirty granules that no block took
 * for a purge delay (all of them when `all`), a run a call. */
static void host_purge_locked(pack_host_t *h, bool all) {
  tes_segment_t *host = host_of(h);
  uint64_t todo = h->free_mask & h->dirty_mask & (all ? ~(uint64_t)0 : h->aging_mask);
  while (todo != 0) {
    unsigned first = (unsigned)__builtin_ctzll(todo), count = 0;
    while (first + count < 64 && (todo >> (first + count) & 1)) count++;
    uint64_t run = run_mask(first, count);
    todo &= ~run;
    size_t bytes = (size_t)count << PACK_GRANULE_SHIFT;
    if (!tes_os_purge((uint8_t *)host + ((size_t)first << PACK_GRANULE_SHIFT), bytes, true)) continue;
    h->dirty_mask &= ~run;
    uint64_t newly = run & ~h->purged_mask; /* not counted yet (MADV_FREE left purged ones dirty) */
    h->purged_mask |= run;
    size_t counted = (size_t)__builtin_popcountll(newly) << PACK_GRANULE_SHIFT;
    host->purged_bytes += counted;
    tes_os_commit_note(-(int64_t)counted);
  }
  __atomic_store_n(&h->due, 0, __ATOMIC_RELAXED);
  h->aging_mask = 0;
}

/* Under large_lock: a due for h's free dirty granules, if none is set:
 * those still free then are purged (a block that takes one takes it off
 * aging_mask). Purging every free granule at each due purged runs freed a
 * moment before, and the next blocks faulted them in again. */
static void host_schedule_locked(pack_host_t *h, int64_t due) {
  if (h->due != 0 || (h->free_mask & h->dirty_mask) == 0) return;
  __atomic_store_n(&h->due, due, __ATOMIC_RELAXED); /* read unlocked by pack_release */
  h->aging_mask = h->free_mask & h->dirty_mask;
  if (due < atomic_load_explicit(&tail_list_due, memory_order_relaxed))
    atomic_store_explicit(&tail_list_due, due, memory_order_relaxed);
}

/* Under large_lock: h leaves `hosts`. */
static void host_unlink_locked(pack_host_t *h) {
  if (h->prev) h->prev->next = h->next;
  else hosts = h->next;
  if (h->next) h->next->prev = h->prev;
  else hosts_last = h->prev;
  h->next = h->prev = NULL;
  if (h->free_mask == PACK_ALL) spares_add(-1);
}

/* An empty host off the list goes to the cache, its dirty granules noted,
 * and granule 0's old data: a segment whose dirty_end is its first page is
 * taken to read as zero beyond it, so a small segment made from it left its
 * page descriptors there unwritten, and adoption read the old bytes as
 * pages in use (fuzz.api, twenty-fifth session: class index 229). */
static TES_NOINLINE void host_free(pack_host_t *h) {
  tes_segment_t *host = host_of(h);
  size_t page = tes_os_page_size();
  size_t dirty = h->dirty_mask ? (size_t)(64 - __builtin_clzll(h->dirty_mask)) << PACK_GRANULE_SHIFT : page;
  host->dirty_end = dirty > h->head_dirty_end ? dirty : h->head_dirty_end;
  tes_segment_free(host);
}

/* A 4 MiB segment (from the cache or new) becomes a host. */
static TES_NOINLINE pack_host_t *host_init(tes_segment_t *host) {
  size_t page = tes_os_page_size();
  size_t size = host->size, dirty = host->dirty_end, purged = host->purged_bytes;
  memset(host, 0, LARGE_HEADER_BYTES);
  host->size = size;
  host->kind = TES_SEG_LARGE; /* pages[0] not in use: owns no block itself */
  host->page_shift = 63;
  host->cookie = (uintptr_t)host ^ tes_process_key;
  atomic_store_explicit(&host->thread_id, TES_TID_SHARED, memory_order_relaxed);
  pack_host_t *h = host_table(host);
  memset(h, 0, sizeof *h);
  h->free_mask = PACK_ALL;
  if (purged == size - page) {
    h->purged_mask = PACK_ALL; /* the cache purged all but the first page */
    host->purged_bytes = purged;
  } else {
    if (purged != 0) tes_os_commit_note((int64_t)purged); /* counted again, and taken as dirty */
    host->purged_bytes = 0;
    if (purged != 0 && dirty < size) dirty = size;
  }
  unsigned dirty_granules = (unsigned)((dirty + PACK_GRANULE - 1) >> PACK_GRANULE_SHIFT);
  h->head_dirty_end = dirty < page ? page : dirty > PACK_GRANULE ? PACK_GRANULE : dirty;
  /* Purged granules may still hold data: MADV_FREE (TESSERA_PURGE_DECOMMIT=0)
   * keeps the segment's dirty_end, and calloc must clear them. */
  h->dirty_mask = run_mask(0, dirty_granules) & PACK_ALL;
  host->dirty_end = page;
  tes_segmap_set_host(host);
  return h;
}

/* A run of span bytes (whole granules) for a new block: its segment with
 * size, dirty_end and purged_bytes set, as tes_segment_obtain gives one. */
static tes_segment_t *pack_take(size_t span) {
  unsigned count = (unsigned)(span >> PACK_GRANULE_SHIFT), first = 0;
  pack_host_t *h;
  tes_lock(&large_lock);
  for (;;) {
    /* A run whose granules are all dirty and not purged first (no page
     * faults), else the first that fits. */
    pack_host_t *any = NULL;
    for (h = hosts; h != NULL; h = h->next) {
      /* Bit i of fits: count free granules from i on (doubling shifts). */
      uint64_t fits = h->free_mask, warm = h->free_mask & h->dirty_mask & ~h->purged_mask;
      for (unsigned run = 1; run < count && fits != 0;) {
        unsigned shift = run < count - run ? run : count - run;
        fits &= fits >> shift;
        warm &= warm >> shift;
        run += shift;
      }
      warm &= fits;
      if (warm != 0) {
        first = (unsigned)__builtin_ctzll(warm);
        break;
      }
      if (fits != 0 && any == NULL) any = h, first = (unsigned)__builtin_ctzll(fits);
    }
    if (h == NULL) h = any;
    if (h != NULL) break;
    tes_unlock(&large_lock);
    tes_segment_t *host = tes_segment_obtain(TES_SEGMENT_SIZE, TES_SEGMENT_SIZE);
    if (host == NULL) return NULL;
    h = host_init(host);
    tes_lock(&large_lock);
    /* Appended: the oldest hosts come first, and blocks gather in them
     * (`mixed` 68 MB against 71 MB newest first). host_init zeroed h's links. */
    h->prev = hosts_last;
    *(hosts_last != NULL ? &hosts_last->next : &hosts) = h;
    hosts_last = h;
    spares_add(1); /* empty until the run below is taken */
    host_schedule_locked(h, waiting_due());
  }
  uint64_t run = run_mask(first, count);
  uint64_t back = h->purged_mask & run, dirty = h->dirty_mask & run;
  if (h->free_mask == PACK_ALL) spares_add(-1); /* in use again */
  h->free_mask &= ~run;
  h->purged_mask &= ~run;
  h->dirty_mask &= ~run;
  h->aging_mask &= ~run;
  size_t recommitted = back != 0 ? (size_t)__builtin_popcountll(back) << PACK_GRANULE_SHIFT : 0;
  host_of(h)->purged_bytes -= recommitted;
  tes_unlock(&large_lock);
  if (recommitted != 0) tes_os_commit_note((int64_t)recommitted);
  tes_segment_t *seg = (tes_segment_t *)((uint8_t *)host_of(h) + ((size_t)first << PACK_GRANULE_SHIFT));
  seg->size = span;
  seg->purged_bytes = 0;
  seg->dirty_end = dirty != 0 ? ((size_t)(64 - __builtin_clzll(dirty)) - first) << PACK_GRANULE_SHIFT : 0;
  return seg;
}

/* realloc: the packed block of seg grows in place to `need` bytes from
 * its segment's start when the granules after its run are free (false:
 * the caller moves it). */
static bool pack_grow(tes_segment_t *seg, size_t need) {
  tes_segment_t *host = (tes_segment_t *)((uintptr_t)seg & ~(uintptr_t)TES_SEGMENT_MASK);
  pack_host_t *h = host_table(host);
  unsigned first = (unsigned)(((uintptr_t)seg & TES_SEGMENT_MASK) >> PACK_GRANULE_SHIFT);
  unsigned count = (unsigned)(seg->size >> PACK_GRANULE_SHIFT);
  unsigned want = (unsigned)(round_up(need, PACK_GRANULE) >> PACK_GRANULE_SHIFT);
  if (first + want > 64) return false;
  uint64_t more = run_mask(first + count, want - count);
  tes_lock(&large_lock);
  bool fits = (h->free_mask & more) == more;
  uint64_t back = 0, dirty = 0;
  if (fits) {
    back = h->purged_mask & more;
    dirty = h->dirty_mask & more;
    h->free_mask &= ~more;
    h->purged_mask &= ~more;
    h->dirty_mask &= ~more;
    h->aging_mask &= ~more;
    if (back != 0) host->purged_bytes -= (size_t)__builtin_popcountll(back) << PACK_GRANULE_SHIFT;
  }
  tes_unlock(&large_lock);
  if (!fits) return false;
  if (back != 0) tes_os_commit_note((int64_t)__builtin_popcountll(back) << PACK_GRANULE_SHIFT);
  if (dirty != 0) seg->dirty_end = ((size_t)(64 - __builtin_clzll(dirty)) - first) << PACK_GRANULE_SHIFT;
  seg->size = (size_t)want << PACK_GRANULE_SHIFT;
  return true;
}

/* The block is set up: lookups may find it. */
static void pack_publish(tes_segment_t *seg) {
  pack_host_t *h = host_table((tes_segment_t *)((uintptr_t)seg & ~(uintptr_t)TES_SEGMENT_MASK));
  unsigned first = (unsigned)(((uintptr_t)seg & TES_SEGMENT_MASK) >> PACK_GRANULE_SHIFT);
  tes_rmw_or64(&h->starts, (uint64_t)1 << first);
}

/* A packed block is freed (off the large list already): its run goes back
 * to its host, the host to the cache once it is empty. */
static void pack_release(tes_segment_t *seg) {
  tes_segment_t *host = (tes_segment_t *)((uintptr_t)seg & ~(uintptr_t)TES_SEGMENT_MASK);
  pack_host_t *h = host_table(host);
  unsigned first = (unsigned)(((uintptr_t)seg & TES_SEGMENT_MASK) >> PACK_GRANULE_SHIFT);
  unsigned count = (unsigned)(seg->size >> PACK_GRANULE_SHIFT);
  note_unpurged(seg); /* its purged tail is the host's dirty granules again */
  size_t dirty_end = seg->dirty_end > seg->size ? seg->size : seg->dirty_end;
  uint64_t dirty = run_mask(first, (unsigned)((dirty_end + PACK_GRANULE - 1) >> PACK_GRANULE_SHIFT));
  if (dirty_end == 0) dirty = 0;
  tes_rmw_and64(&h->starts, ~((uint64_t)1 << first));
#ifdef TES_FAULT_INJECTION
  if (tes_fault_pack_gap != NULL) tes_fault_pack_gap();
#endif
  tes_lock(&large_lock);
  h->free_mask |= run_mask(first, count);
  h->dirty_mask |= dirty;
  pack_host_t *out = NULL;
  if (h->free_mask == PACK_ALL) {
    h->empty_since = tes_os_clock_ms();
    spares_add(1);
    if (spares > PACK_SPARES) {
      for (out = hosts; out->free_mask != PACK_ALL || out == h; out = out->next) {
      }
      host_unlink_locked(out); /* the oldest spare goes, this one stays */
    }
  }
  /* The due is looked at under the lock, and the clock read there when
   * the host has none (once a delay at most). Looked at before the lock, a
   * due the timed purge cleared meanwhile (it found nothing aging, this run
   * not free yet) left the run dirty with no due, until a forced collect
   * (fault.pack_release_purge). */
  if (dirty != 0 && h->due == 0) host_schedule_locked(h, waiting_due());
  tes_unlock(&large_lock);
  if (out != NULL) host_free(out);
}
#else
static bool packed_segment(const tes_segment_t *seg) {
  (void)seg;
  return false;
}
static void pack_release(tes_segment_t *seg) { (void)seg; }
#endif

/* A freed (or released) block's segment: to the cache, or back to its host. */
static void large_segment_release(tes_segment_t *seg) {
  if (packed_segment(seg)) pack_release(seg);
  else tes_segment_free(seg);
}

void tes_large_purge_tails(bool force) {
  int64_t now = 0;
  if (!force) {
    if (atomic_load_explicit(&tail_list_due, memory_order_relaxed) == INT64_MAX) return;
    now = tes_os_clock_ms();
    if (now < atomic_load_explicit(&tail_list_due, memory_order_relaxed)) return;
  }
  int64_t next = INT64_MAX;
#if !TES_SECURE
  tes_segment_t *purging = NULL; /* tails to purge once the lock is let go */
#endif
  tes_lock(&large_lock);
  for (tes_segment_t *seg = tail_list, *after; seg != NULL; seg = after) {
    after = seg->tail_next;
    int64_t due = atomic_load_explicit(&seg->tail_due, memory_order_relaxed);
    if (!force && due > now) {
      if (due < next) next = due;
      continue;
    }
#if TES_SECURE
    purge_waiting(seg, seg->tail_bytes);
    tail_unlink_locked(seg);
#else
    /* Purged below with the lock let go: every large malloc, free and
     * realloc of every thread takes large_lock, and waited out the madvise
     * call (PERFORMANCE.md, twenty-fourth session, lock24). */
    tail_unlink_locked_to(seg, TAIL_PURGING);
    seg->tail_next = purging;
    purging = seg;
#endif
  }
#if !TES_SECURE
  for (pack_host_t *h = hosts; h != NULL; h = h->next) {
    if (h->due == 0) continue;
    if (!force && h->due > now) {
      if (h->due < next) next = h->due;
      continue;
    }
    /* An empty host's granules have all been free since it emptied: all go
     * once that is a delay ago (footprint's refill after its idle phase: 67
     * MB at its end while the spares' granules freed after their host's due
     * was set waited another delay, 37 MB now). */
    host_purge_locked(h, force || (h->free_mask == PACK_ALL && now - h->empty_since >= tes_purge_delay(now)));
    /* Granules still dirty (not aging yet, or madvise failed: a forced
     * purge left those with no due, and nothing but another forced one
     * purged them, fault.pack_purge_failed) wait for a new due. */
    if ((h->free_mask & h->dirty_mask) != 0) {
      host_schedule_locked(h, waiting_due());
      if (h->due < next) next = h->due;
    }
  }
  pack_host_t *out = NULL; /* the spares, chained through their `next` */
  for (pack_host_t *h = hosts, *after; force && h != NULL; h = after) {
    after = h->next;
    if (h->free_mask != PACK_ALL) continue;
    host_unlink_locked(h);
    h->next = out;
    out = h;
  }
#endif
  atomic_store_explicit(&tail_list_due, next, memory_order_relaxed);
  tes_unlock(&large_lock);
#if !TES_SECURE
  /* The block cannot change or go meanwhile: its free, realloc and remap
   * wait for tail_due to leave TAIL_PURGING (tail_purge_wait). */
  for (tes_segment_t *after; purging != NULL; purging = after) {
    after = purging->tail_next;
    purging->tail_next = NULL;
    purge_tail(purging, purging->large_offset + purging->pages[0].block_size);
    atomic_store_explicit(&purging->tail_due, 0, memory_order_release); /* its owner may go on */
  }
  for (pack_host_t *after; out != NULL; out = after) {
    after = out->next;
    host_free(out);
  }
#endif
}

bool tes_large_spare_to_cache(void) {
#if !TES_SECURE
  if (__atomic_load_n(&spares, __ATOMIC_RELAXED) == 0) return false;
  tes_lock(&large_lock);
  pack_host_t *out = hosts;
  while (out != NULL && out->free_mask != PACK_ALL) out = out->next;
  if (out != NULL) host_unlink_locked(out);
  tes_unlock(&large_lock);
  if (out == NULL) return false;
  host_free(out);
  return true;
#else
  return false;
#endif
}

#if !TES_SECURE
/* Before realloc changes a block's size in place: a pending purge of its
 * segment's tail must not run into the grown block, nor read a size that
 * is changing. Only a segment on the tail list takes the lock. */
static void tail_cancel(tes_segment_t *seg) {
  if (atomic_load_explicit(&seg->tail_due, memory_order_acquire) == 0) return;
  tes_lock(&large_lock);
  tail_unlink_locked(seg);
  tes_unlock(&large_lock);
  tail_purge_wait(seg);
}
#endif

/* The alignment a large segment keeps through mremap: its unit, or the
 * block's own alignment when that is larger. The block's offset is a
 * multiple of that alignment, so its lowest set bit is one the segment
 * may take. Not the offset itself: the hardened build puts a block at its
 * segment's end, more than a unit in when it took a larger cached segment
 * (an 11 MiB block in a 16 MiB one starts 5 MiB + 24 KiB in), and mremap
 * to such an "alignment" put the segment off its unit, where no lookup
 * finds its header (SIGSEGV at the next free or malloc_usable_size). */
static size_t remap_alignment(const tes_segment_t *seg) {
  size_t low = seg->large_offset & (~seg->large_offset + 1);
  return low > TES_SEGMENT_SIZE ? low : TES_SEGMENT_SIZE;
}

/* A block shrunk in place by realloc, whose segment now needs only
 * new_size bytes: when that gives back half of the mapping or more (and a
 * unit at least), the mapping shrinks to new_size with mremap in place, and
 * address space and the reserved and committed gauges go down (500 blocks
 * of 16 MiB shrunk to 256 KiB kept 10 GB mapped before). The block's start
 * does not move, so no other thread can tell (its unit stays in the segment
 * map). False when it is not worth it (the caller purges instead). */
static bool shrink_mapping(tes_segment_t *seg, size_t new_size) {
  if (new_size > seg->size / 2 || seg->size - new_size < TES_SEGMENT_SIZE) return false;
  tes_segmap_shrink(seg, new_size);
  note_unpurged_live(seg);
  if (tes_os_remap(seg, seg->size, new_size, remap_alignment(seg)) != seg) {
    tes_segmap_set(seg, true); /* cannot happen (shrinking stays in place): keep it whole */
    return false;
  }
  seg->size = new_size;
  if (seg->dirty_end > new_size) seg->dirty_end = new_size;
  return true;
}

/* calloc of a block in a reused segment: its first n bytes may hold the
 * last block's data. `dirty_end` says how far that block reached, not which
 * pages it wrote: a program that calloc'd 40 MiB and wrote a byte left one
 * page resident, and the memset here made all 40 MiB resident again (peak
 * RSS 778 MB against glibc's 275 for 8 live blocks of 1-40 MiB so used).
 * Over LARGE_TAIL_PURGE, mincore counts the resident pages: when fewer than
 * a quarter are, the range is given back (MADV_DONTNEED reads as zero,
 * swapped-out pages included) and only its partial pages are cleared; a
 * block that was written whole is cleared in place, which is faster than
 * faulting every page in again. */
static void zero_reused(uint8_t *p, size_t n) {
  size_t page = tes_os_page_size();
  if (n >= LARGE_TAIL_PURGE) {
    uint8_t *lo = (uint8_t *)round_up((uintptr_t)p, page), *hi = (uint8_t *)(((uintptr_t)p + n) & ~(page - 1));
    size_t pages = (size_t)(hi - lo) / page;
    size_t resident = tes_os_resident_pages(lo, (size_t)(hi - lo));
    if (resident != SIZE_MAX && resident < pages / 4 && tes_os_purge(lo, (size_t)(hi - lo), true)) {
      memset(p, 0, (size_t)(lo - p));
      memset(hi, 0, (size_t)(p + n - hi));
      return;
    }
  }
  memset(p, 0, n);
}

/* Large blocks come and go through the segment cache without touching the
 * small-object slow path, which is where due purges are otherwise run: run
 * them here too (the cache's, the waiting tails' and this heap's retired
 * pages), so freed memory leaves RSS after the purge delay even in a program
 * whose small allocations all stay on the fast path while it churns large
 * blocks. One clock read for the three schedules, none when nothing is
 * pending; only when something is due do their purges read it again. (Each
 * read its own: three reads a large malloc in `mixed`, where this heap's
 * retired pages and the cached segments are pending nearly all the time.) */
static void purge_what_is_due(tes_heap_t *heap) {
  int64_t first = atomic_load_explicit(&heap->purge_due, memory_order_relaxed);
  int64_t cache = tes_cache_purge_due(), tails = atomic_load_explicit(&tail_list_due, memory_order_relaxed);
  if (cache < first) first = cache;
  if (tails < first) first = tails;
  if (first == INT64_MAX || tes_os_clock_ms() < first) return;
  tes_heap_purge_due(heap);
  tes_cache_purge(false);
}

/* A large block about to be written where nothing is resident (a fresh
 * mapping, a purged cached segment, purged or new granules of a host): the
 * heap's retired pages still waiting for their purge go first, up to the
 * block's fresh bytes, as before a fresh small or medium segment
 * (heap.c, tes_heap_purge_for_growth). Only pages this heap carved and
 * emptied: the dirty pages of a segment it took from the cache a moment ago
 * (schedule_dirty_pages) are the ones it is about to carve (footprint's
 * small phase, whose pointer array grows by realloc, took 42 such pages
 * back through page faults). Without it, footprint's large phase wrote its
 * blocks in fresh memory beside the 12 MB of small pages its medium phase
 * had freed, for the purge delay: peak 133 MB, 116 MB with it (packed;
 * docs/PERFORMANCE.md, foot25). A trylock: a sweep holding the lock is
 * purging these pages already. Out of line, and called only when the block
 * reaches past what was dirty: inlined, its load cost the packed 200 KiB
 * cycle 4 instructions a cycle (lib.large_cycle_budget). */
#if !TES_SECURE
static TES_NOINLINE void purge_for_large_growth(tes_heap_t *heap, size_t fresh) {
  if (atomic_load_explicit(&heap->purge_due, memory_order_relaxed) == INT64_MAX) return; /* none waits */
  if (!tes_trylock(&heap->purge_lock)) return;
  tes_heap_purge_for_growth(heap, fresh, true);
  tes_unlock(&heap->purge_lock);
}
#endif

/* growable (hardened build, realloc only): the block goes to the front of
 * a segment with as much room again behind it, followed by a guard page of
 * its own, which tes_large_realloc then moves as the block grows. */
static void *large_alloc(tes_heap_t *heap, size_t size, size_t alignment, bool zero, bool growable) {
  if (size > LARGE_MAX_SIZE || alignment > TES_MAX_ALIGNMENT) {
    heap->counters.malloc_failed++;
    errno = ENOMEM;
    return NULL;
  }
  purge_what_is_due(heap);
  size_t offset = TES_LARGE_OFFSET;
  if (alignment > offset) offset = alignment;
#if TES_SECURE
  size_t page_size = tes_os_page_size();
  /* The block ends right before the segment's last OS page, a guard put
   * there when the segment was mapped (tes_secure_guard_segment): placed at
   * the end, the block needs no mprotect of its own, even when the segment
   * comes from the cache. Its start is the highest aligned address that
   * leaves room for the size and the padding. */
  size_t align = alignment > 16 ? alignment : 16;
  size_t lowest = tes_secure_first_free_offset();
  if (lowest < offset) lowest = offset;
  lowest = round_up(lowest, align);
  size_t total = mapping_size(lowest + size + TES_LARGE_PADDING + page_size);
  /* Room to double already: to the page (a power of two on top made a 300
   * KiB block grown by realloc map 1 MiB). */
  if (growable) total = round_up(lowest + 2 * (size + TES_LARGE_PADDING) + 2 * page_size, page_size);
#else
  (void)growable;
  size_t usable = block_usable(size);
  size_t total = mapping_size(offset + usable);
  bool packed = alignment <= TES_LARGE_OFFSET && offset + usable <= PACK_MAX && tes_opt(TES_OPTION_LARGE_PACK);
#endif
  tes_segment_t *seg =
#if !TES_SECURE
      packed ? pack_take(round_up(offset + usable, PACK_GRANULE)) :
#endif
             tes_segment_obtain(total, alignment > TES_SEGMENT_SIZE ? alignment : TES_SEGMENT_SIZE);
  if (seg == NULL) {
    heap->counters.malloc_failed++;
    errno = ENOMEM;
    return NULL;
  }
  size_t seg_size = seg->size, dirty = seg->dirty_end, purged = seg->purged_bytes;
#if TES_SECURE
  size_t clean_below = seg->clean_below;
#endif
  memset(seg, 0, LARGE_HEADER_BYTES);
  seg->size = seg_size;
  seg->dirty_end = dirty;
#if TES_SECURE
  offset = (seg_size - page_size - size - TES_LARGE_PADDING) & ~(align - 1);
  size_t usable = seg_size - page_size - offset;
  if (growable) {
    offset = lowest;
    usable = round_up(offset + size + TES_LARGE_PADDING, page_size) - offset;
  }
  /* At the segment's end (with the guard after it), or at the front. */
  recommit_span(seg, purged, offset, growable ? offset + usable : seg_size);
  if (growable) {
    if (offset + usable != seg_size - page_size) {
      if (!tes_os_protect((uint8_t *)seg + offset + usable, page_size)) {
        tes_cache_put(seg);
        heap->counters.malloc_failed++;
        errno = ENOMEM;
        return NULL;
      }
      seg->large_guard = offset + usable;
    }
  }
  /* What a previous, longer block (or a small segment) left dirty in front
   * of this one: when it is more than LARGE_TAIL_PURGE, it goes back one
   * purge delay from now if the block still lives (tail_list), as the
   * default build's dirty tails behind its blocks do; freed before, it goes
   * to the cache with its segment, which purges idle segments. It was
   * purged at once: `bench_aligned` made 737 madvise calls (1.2 GB) where
   * the default build makes 19. */
  size_t dirty_from = round_up(clean_below > lowest ? clean_below : lowest, page_size);
  size_t dirty_to = offset & ~(page_size - 1);
  if (dirty < dirty_to) dirty_to = dirty & ~(page_size - 1); /* nothing beyond was ever written */
  int64_t tail_due = 0;
  if (dirty_to > dirty_from + LARGE_TAIL_PURGE) {
    tail_due = waiting_due();
    seg->tail_from = dirty_from;
    seg->tail_bytes = dirty_to - dirty_from;
  }
  bool block_dirty = dirty > offset && clean_below < offset + usable;
  seg->clean_below = clean_below < offset ? clean_below : offset;
  if (seg->dirty_end < offset + usable) seg->dirty_end = offset + usable;
#else
  recommit_span(seg, purged, offset, offset + usable);
  /* A reused segment may hold a dirty tail beyond the new block (a previous,
   * longer block, or a whole segment of small pages): when it is more than
   * LARGE_TAIL_PURGE it goes back one purge delay from now if the block
   * still lives (tail_list), so RSS follows what is in use; a shorter tail
   * waits for the segment's next idle time in the cache. Either way large
   * blocks cycling through the cache cost no system call. */
  int64_t tail_due = 0;
  size_t keep = round_up(offset + usable, tes_os_page_size());
  if (seg->dirty_end > keep + LARGE_TAIL_PURGE) {
    tail_due = waiting_due();
    seg->tail_from = keep;
    seg->tail_bytes = round_up(seg->dirty_end, tes_os_page_size()) - keep;
  }
  if (seg->dirty_end < offset + usable) { /* (seg->dirty_end is `dirty`) */
    seg->dirty_end = offset + usable;
    purge_for_large_growth(heap, offset + usable - dirty);
  }
  bool block_dirty = dirty > offset;
#endif
  seg->page_shift = 63;
  seg->kind = TES_SEG_LARGE;
  seg->page_count = 1;
  seg->used_pages = 1;
  seg->large_offset = offset;
  seg->cookie = (uintptr_t)seg ^ tes_process_key;
  atomic_store_explicit(&seg->thread_id, TES_TID_SHARED, memory_order_relaxed);
  tes_page_t *page = &seg->pages[0];
  page->area = (uint8_t *)seg + offset;
  page->block_size = usable;
  page->reserved = page->capacity = page->used = 1;
  tes_page_in_use_set(page, 1);
  page->class_index = 0xff;
  atomic_store_explicit(&page->heap, heap, memory_order_relaxed);
#if TES_SECURE
  page->divisor = 0; /* no block test accepts a pointer of a large page */
  tes_secure_page_init(page);
#endif
  if (zero && block_dirty) {
    size_t n = dirty - offset;
    zero_reused(page->area, n < usable ? n : usable);
  }
  /* In use: what the program may use, as tes_heap_visit says. */
  bool probed = false;
  size_t counted = tail_due != 0 ? tail_count(seg, &probed) : 0;
  bool tail_waits = list_insert(seg, (int64_t)(usable - TES_LARGE_PADDING), tail_due, counted, !probed);
  if (tail_due != 0 && !tail_waits) tail_wait_or_purge(seg, tail_due, probed); /* the block is not out yet */
#if !TES_SECURE
  if (packed) pack_publish(seg);
  else
#endif
    tes_segmap_set(seg, true);
  heap->counters.large_allocs++;
#if TES_SECURE
  tes_secure_set_padding(page, page->area, size);
#endif
  return page->area;
}

void *tes_large_alloc(tes_heap_t *heap, size_t size, size_t alignment, bool zero) {
  return large_alloc(heap, size, alignment, zero, false);
}

#if TES_SECURE
void *tes_large_alloc_growable(tes_heap_t *heap, size_t size) { return large_alloc(heap, size, 0, false, true); }

/* realloc copied the block elsewhere (the hardened build's fallback when
 * its segment could not grow with its pages) and frees it next: give its pages back
 * now. Growing a buffer step by step moves it O(log n) times, and each old
 * segment waited in the cache, dirty, for the purge delay (a 300 MB Python
 * bytearray grown by += peaked at 593 MB RSS, the default build, which grows
 * in place with mremap, at 302 MB). The page holding the padding after the
 * requested bytes stays, for free's checks. */
void tes_large_discard(tes_segment_t *seg, void *p, size_t requested) {
  size_t page = tes_os_page_size();
  uintptr_t lo = round_up((uintptr_t)p, page), hi = ((uintptr_t)p + requested) & ~(uintptr_t)(page - 1);
  if (hi > lo + LARGE_TAIL_PURGE && tes_os_purge((void *)lo, hi - lo, true)) note_purged_live(seg, hi - lo);
}

/* A guard that realloc moved goes back to read-write before the segment is
 * cached: a cached segment has only the guards every segment has. */
static void drop_moved_guard(tes_segment_t *seg) {
  if (seg->large_guard) tes_os_unprotect((uint8_t *)seg + seg->large_guard, tes_os_page_size());
  seg->large_guard = 0;
}
#endif

void tes_large_free(tes_segment_t *seg) {
  tes_page_t *page = &seg->pages[0];
#if TES_SECURE
  drop_moved_guard(seg);
#endif
  tes_lock(&large_lock);
  /* Recorded before in_use clears: a second free of the block that finds
   * it not in use finds it in the ring (tes_report_unowned reads the ring
   * under this lock), a double free, not "invalid free" (two threads
   * freeing the block at once: 2 in 206,000 rounds named it so before). */
  freed_record_locked(page->area, page->block_size);
  tes_page_in_use_set(page, 0);
  in_use_add_locked(-(int64_t)(page->block_size - TES_LARGE_PADDING), -1);
  list_remove_locked(seg);
  tes_unlock(&large_lock);
  tail_purge_wait(seg);
  seg->used_pages = 0;
  large_segment_release(seg);
}

size_t tes_large_usable(const tes_segment_t *seg) { return seg->pages[0].block_size - TES_LARGE_PADDING; }

bool tes_large_owned_block(const tes_segment_t *seg, const void *p) {
  return seg->kind == TES_SEG_LARGE && tes_page_in_use_any_thread(&seg->pages[0]) &&
         (const uint8_t *)p == seg->pages[0].area;
}

/* A segment about to be remapped leaves the large list and the segment
 * map (a walk must not meet it, a lookup must not find it, while its pages
 * move); remap_failed or remap_done puts it (moved or not) back. */
static void remap_begin(tes_segment_t *seg) {
  tes_lock(&large_lock);
  list_remove_locked(seg);
  large_moving++;
  tes_unlock(&large_lock);
  tail_purge_wait(seg);
  tes_segmap_set(seg, false);
  note_unpurged(seg);
}

/* The remap failed: seg is back as it was. */
static void remap_failed(tes_segment_t *seg) {
  tes_segmap_set(seg, true);
  tes_lock(&large_lock);
  list_insert_locked(seg);
  large_moving--;
  tes_unlock(&large_lock);
}

/* The remap worked: `moved` (seg, or where its pages went) now has `total`
 * bytes and holds block p, moved to offset + moved; its usable bytes
 * become `usable` (they were `old_usable`). */
static void *remap_done(tes_segment_t *seg, tes_segment_t *moved, void *p, size_t total, size_t usable) {
  size_t offset = moved->large_offset, old_usable = moved->pages[0].block_size;
  moved->size = total;
  moved->cookie = (uintptr_t)moved ^ tes_process_key;
  tes_page_t *page = &moved->pages[0];
  page->area = (uint8_t *)moved + offset;
  tes_page_in_use_set(page, 1); /* its copy of area too */
  page->block_size = usable;
  if (moved->dirty_end < offset + usable) moved->dirty_end = offset + usable;
  tes_lock(&large_lock);
  if (moved != seg) freed_record_locked(p, old_usable); /* p is gone: a later free of it is a double free */
  list_insert_locked(moved);
  in_use_add_locked((int64_t)usable - (int64_t)old_usable, 0);
  large_moving--;
  tes_unlock(&large_lock);
  tes_segmap_set(moved, true);
  return page->area;
}

#if TES_SECURE
/* The hardened block outgrows its segment: the segment grows (to half as
 * large again at least, as the default build's does) with its pages, by
 * tes_os_remap_guarded, which keeps the guard after the header where it is
 * and moves the segment's last-page guard to the new end; the block keeps
 * its offset and ends at `end`, where a guard of its own goes unless the
 * segment's last page is there. Its moved guard, if it has one, goes back
 * to read-write first (the block's pages must be one mapping for mremap to
 * move them; it was inside the new block anyway), and is put back if the
 * remap fails. Before, the block was copied to a new segment, so a buffer
 * grown in steps was resident twice for a moment (iconv of 117 MB from a
 * pipe: 197 MB peak against glibc's 116 MB; a buffer grown by 64 KiB steps
 * to 300 MiB: 1.71x its size). NULL on failure (seg and its block intact,
 * errno untouched): the caller copies. */
static tes_segment_t *grow_guarded(tes_segment_t *seg, void *p, size_t end) {
  size_t page_size = tes_os_page_size();
  size_t want = end + page_size;
  if (want < seg->size + seg->size / 2) want = seg->size + seg->size / 2;
  size_t total = mapping_size(want);
  size_t fixed = total - page_size;
  size_t cuts[3], count = 0, header_guard = tes_secure_header_guard();
  cuts[count++] = 0;
  if (header_guard) {
    cuts[count++] = header_guard;
    cuts[count++] = header_guard + page_size;
  }
  size_t old_guard = seg->large_guard;
  remap_begin(seg);
  if (old_guard) {
    tes_os_unprotect((uint8_t *)seg + old_guard, page_size);
    seg->large_guard = 0;
  }
  tes_segment_t *moved = tes_os_remap_guarded(seg, seg->size, total, remap_alignment(seg), cuts, count,
                                              tes_secure_end_guard(), end != fixed ? end : 0);
  if (moved == NULL) {
    if (old_guard && tes_os_protect((uint8_t *)seg + old_guard, page_size)) seg->large_guard = old_guard;
    remap_failed(seg);
    return NULL;
  }
  moved->large_guard = end != fixed ? end : 0;
  remap_done(seg, moved, p, total, end - moved->large_offset);
  return moved;
}
#endif

void *tes_large_realloc(tes_segment_t *seg, void *p, size_t size) {
  tes_page_t *page = &seg->pages[0];
  if (size > LARGE_MAX_SIZE) return NULL;
#if TES_SECURE
  /* The block's end is a guard page: the segment's last one, or one that
   * realloc moved. The block stays in place while the new size ends within
   * a page of that guard; otherwise the guard moves (the block keeps its
   * start) if the segment has room (two mprotects), else the segment grows
   * with its pages (grow_guarded: mremap, no copy); only when that fails
   * does the caller move the block (to a growable one,
   * tes_large_alloc_growable, and copy it). */
  size_t page_size = tes_os_page_size();
  size_t need = size + TES_LARGE_PADDING;
  size_t old_usable = page->block_size;
  if (need <= old_usable && old_usable - need < page_size) return p;
  size_t offset = seg->large_offset;
  size_t fixed = seg->size - page_size; /* the segment's own guard */
  size_t end = round_up(offset + need, page_size);
  if (end > fixed) {
    tes_segment_t *grown = grow_guarded(seg, p, end);
    return grown != NULL ? grown->pages[0].area : NULL;
  }
  if (end != fixed && !tes_os_protect((uint8_t *)seg + end, page_size)) return NULL;
  if (seg->large_guard) tes_os_unprotect((uint8_t *)seg + seg->large_guard, page_size);
  seg->large_guard = end != fixed ? end : 0;
  page->block_size = end - offset;
  in_use_add((int64_t)page->block_size - (int64_t)old_usable);
  if (seg->dirty_end < end) seg->dirty_end = end;
  if (end > old_usable + offset) note_unpurged_live(seg); /* grown: it may cover purged pages */
  /* Shrunk: the mapping may end after the new guard, which then becomes
   * the segment's own last page. Otherwise what the block used behind its
   * new guard goes back now (1,600 MiB stayed resident after 100 blocks of
   * 16 MiB were shrunk to 256 KiB, against 27 MiB in the default build). */
  if (end != fixed && shrink_mapping(seg, end + page_size)) {
    seg->large_guard = 0;
    if (seg->dirty_end > end) seg->dirty_end = end;
    return p;
  }
  if (seg->dirty_end > end + page_size + LARGE_TAIL_PURGE &&
      tes_os_purge((uint8_t *)seg + end + page_size, round_up(seg->dirty_end, page_size) - end - page_size, true)) {
    note_purged_live(seg, round_up(seg->dirty_end, page_size) - end - page_size);
    seg->dirty_end = end + page_size;
  }
  return p;
#else
  size_t offset = seg->large_offset;
  size_t usable = block_usable(size);
  size_t old_usable = page->block_size;
  /* The same whole pages: nothing to do. A buffer grown a byte at a time
   * comes here 4,095 times a page; each paid the in-use gauge's atomic add
   * and peak check (3.3x glibc's time growing one to 20 MB). */
  if (usable == old_usable) return p;
  tail_cancel(seg);
  /* A packed block grows over the free granules after it, else it moves
   * (to a segment of its own beyond PACK_MAX, which mremap then grows). */
  if (offset + usable > seg->size && packed_segment(seg) && (offset + usable > PACK_MAX || !pack_grow(seg, offset + usable)))
    return NULL;
  if (offset + usable <= seg->size) {
    page->block_size = usable;
    in_use_add((int64_t)usable - (int64_t)old_usable);
    if (seg->dirty_end < offset + usable) seg->dirty_end = offset + usable;
    if (usable >= old_usable) note_unpurged(seg); /* grown: it may cover purged pages */
    else if (!shrink_mapping(seg, round_up(offset + usable, tes_os_page_size()))) purge_tail(seg, offset + usable);
    return p;
  }
  /* Grow the mapping: mremap keeps the pages, moves them if it must. To half
   * as large again at least, so that a buffer grown in small steps remaps
   * O(log n) times, in mapping_size's sizes (it took whole 4 MiB units:
   * 1,000 blocks of 200 KiB grown to 300 KiB reserved 4 GB). */
  size_t want = offset + usable;
  if (want < seg->size + seg->size / 2) want = seg->size + seg->size / 2;
  size_t total = mapping_size(want);
  remap_begin(seg);
  tes_segment_t *moved = tes_os_remap(seg, seg->size, total, remap_alignment(seg));
  if (moved == NULL) {
    remap_failed(seg);
    return NULL;
  }
  return remap_done(seg, moved, p, total, usable);
#endif
}

TES_COLD void tes_large_reassign(tes_heap_t *from, tes_heap_t *to, bool release) {
  tes_segment_t *drop = NULL;
  tes_lock(&large_lock);
  while (large_moving > 0) { /* a block of `from` may be off the list: let it come back */
    tes_unlock(&large_lock);
    tes_os_yield();
    tes_lock(&large_lock);
  }
  tes_segment_t *seg = tes_large_list;
  while (seg != NULL) {
    tes_segment_t *next = seg->next;
    if (atomic_load_explicit(&seg->pages[0].heap, memory_order_relaxed) == from) {
      if (release) {
        list_remove_locked(seg);
        in_use_add_locked(-(int64_t)(seg->pages[0].block_size - TES_LARGE_PADDING), -1);
        freed_record_locked(seg->pages[0].area, seg->pages[0].block_size);
        seg->next = drop;
        drop = seg;
      } else {
        atomic_store_explicit(&seg->pages[0].heap, to, memory_order_relaxed);
      }
    }
    seg = next;
  }
  tes_unlock(&large_lock);
  while (drop != NULL) {
    tes_segment_t *next = drop->next;
    tes_page_t *page = &drop->pages[0];
    tail_purge_wait(drop);
#if TES_SECURE
    drop_moved_guard(drop);
#endif
    tes_page_in_use_set(page, 0);
    drop->used_pages = 0;
    large_segment_release(drop);
    drop = next;
  }
}
