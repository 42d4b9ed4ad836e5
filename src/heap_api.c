/* heap_api.c — first-class heaps.
 *
 * A tes_heap_t made by tes_heap_new is an ordinary heap (heap.c) sharing the
 * creating thread's id, so blocks from it are freed by plain free() from any
 * thread (the owner's frees are local, others' are remote hand-offs).
 * tes_heap_destroy returns all its segments at once; tes_heap_delete moves
 * its pages to its thread's default heap (both at once on that thread, else
 * on that thread's next slow path: tes_heap_process_deletes). The walk of
 * live blocks (tes_heap_visit) is in heap_visit.c.
 * Called by applications; never used internally. */
#include "alloc_inline.h"

void *tes_calloc_in(tes_heap_t *heap, size_t count, size_t size);
void *tes_realloc_in(tes_heap_t *heap, void *p, size_t size);

TES_API tes_heap_t *tes_heap_new(void) {
  tes_heap_t *owner = tes_thread_heap_init();
  if (owner == NULL) return NULL;
  tes_heap_process_deletes(owner); /* the structs other threads deleted can be reused */
  tes_heap_t *heap = tes_heap_alloc_struct();
  if (heap == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  tes_heap_setup(heap, owner->thread_id, owner);
  /* the thread's exit deletes the ones it leaves (tes_heap_abandon) */
  atomic_fetch_add_explicit(&owner->first_class_heaps, 1, memory_order_relaxed);
  return heap;
}

TES_API void *tes_heap_malloc(tes_heap_t *heap, size_t size) {
  if (heap == NULL) heap = tes_tls_heap;
  return tes_malloc_inline(heap, size);
}

TES_API void *tes_heap_calloc(tes_heap_t *heap, size_t count, size_t size) {
  return tes_calloc_in(heap ? heap : tes_tls_heap, count, size);
}

TES_API void *tes_heap_realloc(tes_heap_t *heap, void *p, size_t size) {
  return tes_realloc_in(heap ? heap : tes_tls_heap, p, size);
}

/* Another thread's heap: its thread may be freeing blocks of it right now,
 * locally and without atomics, and its slice table (which lists the heap's
 * pages) is that thread's alone to write, so only it may move the pages (to
 * its default heap) or free them: tes_heap_process_deletes. Counted first,
 * then marked, then uncounted: the owner never sees neither. */
static bool leave_to_owner(tes_heap_t *heap, bool destroy) {
  tes_heap_t *owner = heap->thread_default;
  /* From a tes_heap_visit visitor of the owner's thread, marked too: the
   * walk may be of this heap (its segments freed or moved under it), or of
   * every heap (under a lock the work takes). Done at the walk's end. */
  if (tes_tls_heap == owner && owner->visit_depth == 0) return false;
  atomic_fetch_add_explicit(&owner->first_class_deleted, 1, memory_order_acq_rel);
  atomic_store_explicit(&heap->destroy_requested, destroy, memory_order_relaxed); /* published by the next store */
  atomic_store_explicit(&heap->delete_requested, true, memory_order_release);
  atomic_fetch_sub_explicit(&owner->first_class_heaps, 1, memory_order_relaxed);
  return true;
}

TES_API void tes_heap_destroy(tes_heap_t *heap) {
  if (heap == NULL || heap->is_static || heap->is_default) return;
  if (leave_to_owner(heap, true)) return;
  tes_heap_free_all(heap);
  tes_stats_fold_heap(heap);
  atomic_fetch_sub_explicit(&heap->thread_default->first_class_heaps, 1, memory_order_relaxed);
  tes_heap_release_struct(heap);
}

TES_API void tes_heap_delete(tes_heap_t *heap) {
  if (heap == NULL || heap->is_static || heap->is_default) return;
  if (leave_to_owner(heap, false)) return;
  tes_heap_t *to = tes_thread_heap_init();
  if (to == NULL) return; /* cannot happen once the heap exists: its thread had one */
  tes_heap_move_pages(heap, to);
  tes_stats_fold_heap(heap);
  atomic_fetch_sub_explicit(&heap->thread_default->first_class_heaps, 1, memory_order_relaxed);
  tes_heap_release_struct(heap);
}
