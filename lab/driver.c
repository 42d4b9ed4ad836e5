/* driver: trace replay, per-op correctness checks and malloc-lab metrics
 * (contract in driver.h).
 *
 * Live payloads are kept in a treap keyed by start address, one node per
 * trace slot (preallocated), so the overlap check of each returned block is
 * O(log n): live payloads are disjoint, so a walk from the root that goes
 * left when the new interval ends before a node and right when it starts
 * after it meets an overlapping payload if there is one.
 *
 * Each payload is filled with a pattern derived from its slot and the byte
 * offset; it is verified on free and after realloc (the first min(old, new)
 * bytes). Blocks above FULL_FILL_LIMIT are filled and checked only in a head
 * and a tail window, so a 36 GB request does not touch 36 GB of memory. */
#include "driver.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memlib.h"

#define FULL_FILL_LIMIT ((uint64_t)256 << 10)
#define EDGE_WINDOW ((uint64_t)32 << 10)

typedef struct live_node_s {
  uintptr_t lo, hi;   /* payload [lo, hi), hi > lo */
  int32_t left, right;
  uint32_t prio;
} live_node_t;

struct driver_s {
  size_t cap;          /* slots the arrays below can hold */
  void **ptr;          /* slot -> current payload (NULL when none) */
  uint64_t *size;      /* slot -> requested size of that payload */
  live_node_t *node;   /* slot -> its interval node */
  int32_t root;
  uint32_t prio_state;
};

/* ---- the system allocator as a pseudo-policy ---------------------------- */

static int system_init(size_t align) { (void)align; return 0; }
static void *system_malloc(size_t size) { return malloc(size); }
static void system_free(void *p) { free(p); }
static void *system_realloc(void *p, size_t size) {
  /* C23 leaves realloc(p, 0) implementation-defined; give it the lab
   * meaning (free, NULL) so every allocator replays the same requests. */
  if (size == 0) {
    free(p);
    return NULL;
  }
  return realloc(p, size);
}

static const lab_policy_t system_policy = {
  .name = "system",
  .description = "the C library's malloc/free/realloc (reference throughput; no simulated heap)",
  .init = system_init,
  .malloc = system_malloc,
  .free = system_free,
  .realloc = system_realloc,
  .check = NULL,
};

const lab_policy_t *driver_system_policy(void) { return &system_policy; }
bool driver_is_system(const lab_policy_t *p) { return p == &system_policy; }

/* ---- workspace ----------------------------------------------------------- */

driver_t *driver_new(void) {
  driver_t *d = calloc(1, sizeof *d);
  if (d) d->root = -1;
  return d;
}

void driver_free(driver_t *d) {
  if (!d) return;
  free(d->ptr);
  free(d->size);
  free(d->node);
  free(d);
}

static int reserve(driver_t *d, size_t slots) {
  if (slots <= d->cap) return 0;
  void **ptr = realloc(d->ptr, slots * sizeof *ptr);
  if (ptr) d->ptr = ptr;
  uint64_t *size = realloc(d->size, slots * sizeof *size);
  if (size) d->size = size;
  live_node_t *node = realloc(d->node, slots * sizeof *node);
  if (node) d->node = node;
  if (!ptr || !size || !node) return -1;
  d->cap = slots;
  return 0;
}

/* ---- live intervals: a treap keyed by address --------------------------- */

static uint32_t next_prio(driver_t *d) {
  uint32_t x = d->prio_state;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return d->prio_state = x;
}

/* The slot of a live payload overlapping [lo, hi), or -1. */
static int32_t live_find_overlap(const driver_t *d, uintptr_t lo, uintptr_t hi) {
  int32_t n = d->root;
  while (n >= 0) {
    const live_node_t *x = &d->node[n];
    if (hi <= x->lo) n = x->left;
    else if (lo >= x->hi) n = x->right;
    else return n;
  }
  return -1;
}

static int32_t live_insert_at(driver_t *d, int32_t t, int32_t s) {
  if (t < 0) return s;
  live_node_t *n = d->node;
  if (n[s].lo < n[t].lo) {
    n[t].left = live_insert_at(d, n[t].left, s);
    if (n[n[t].left].prio > n[t].prio) {  /* rotate right */
      int32_t l = n[t].left;
      n[t].left = n[l].right;
      n[l].right = t;
      return l;
    }
  } else {
    n[t].right = live_insert_at(d, n[t].right, s);
    if (n[n[t].right].prio > n[t].prio) {  /* rotate left */
      int32_t r = n[t].right;
      n[t].right = n[r].left;
      n[r].left = t;
      return r;
    }
  }
  return t;
}

static int32_t live_merge(live_node_t *n, int32_t a, int32_t b) {
  if (a < 0) return b;
  if (b < 0) return a;
  if (n[a].prio > n[b].prio) {
    n[a].right = live_merge(n, n[a].right, b);
    return a;
  }
  n[b].left = live_merge(n, a, n[b].left);
  return b;
}

static int32_t live_remove_at(driver_t *d, int32_t t, int32_t s) {
  if (t < 0) return -1;
  live_node_t *n = d->node;
  if (t == s) return live_merge(n, n[t].left, n[t].right);
  if (n[s].lo < n[t].lo) n[t].left = live_remove_at(d, n[t].left, s);
  else n[t].right = live_remove_at(d, n[t].right, s);
  return t;
}

static void live_insert(driver_t *d, int32_t slot, uintptr_t lo, uintptr_t hi) {
  d->node[slot] = (live_node_t){.lo = lo, .hi = hi, .left = -1, .right = -1, .prio = next_prio(d)};
  d->root = live_insert_at(d, d->root, slot);
}

static void live_remove(driver_t *d, int32_t slot) { d->root = live_remove_at(d, d->root, slot); }

/* ---- payload pattern ----------------------------------------------------- */

static uint64_t pattern_seed(uint32_t slot) {
  uint64_t x = ((uint64_t)slot + 1) * 0x9E3779B97F4A7C15ull;
  return x ^ (x >> 31);
}

/* The 8 pattern bytes of word k of a block with this seed. */
static inline uint64_t pattern_word(uint64_t seed, uint64_t k) {
  return seed ^ (k * 0xD6E8FEB86659FD93ull);
}

static void fill_range(unsigned char *p, uint64_t from, uint64_t to, uint64_t seed) {
  uint64_t i = from;
  for (; i < to && (i & 7); i++) {
    uint64_t w = pattern_word(seed, i >> 3);
    p[i] = (unsigned char)(w >> (8 * (i & 7)));
  }
  for (; i + 8 <= to; i += 8) {
    uint64_t w = pattern_word(seed, i >> 3);
    memcpy(p + i, &w, 8);
  }
  for (; i < to; i++) {
    uint64_t w = pattern_word(seed, i >> 3);
    p[i] = (unsigned char)(w >> (8 * (i & 7)));
  }
}

/* First offset in [from, to) not carrying the pattern, or UINT64_MAX. */
static uint64_t verify_range(const unsigned char *p, uint64_t from, uint64_t to, uint64_t seed) {
  uint64_t i = from;
  for (; i < to && (i & 7); i++)
    if (p[i] != (unsigned char)(pattern_word(seed, i >> 3) >> (8 * (i & 7)))) return i;
  for (; i + 8 <= to; i += 8) {
    uint64_t w, want = pattern_word(seed, i >> 3);
    memcpy(&w, p + i, 8);
    if (w != want) break;  /* find the exact byte below */
  }
  for (; i < to; i++)
    if (p[i] != (unsigned char)(pattern_word(seed, i >> 3) >> (8 * (i & 7)))) return i;
  return UINT64_MAX;
}

/* The windows of a block of this size that carry the pattern. */
static int fill_windows(uint64_t size, uint64_t from[2], uint64_t to[2]) {
  if (size <= FULL_FILL_LIMIT) {
    from[0] = 0;
    to[0] = size;
    return 1;
  }
  from[0] = 0;
  to[0] = EDGE_WINDOW;
  from[1] = size - EDGE_WINDOW;
  to[1] = size;
  return 2;
}

static void fill_block(void *p, uint64_t size, uint32_t slot) {
  uint64_t from[2], to[2];
  int n = fill_windows(size, from, to);
  for (int i = 0; i < n; i++) fill_range(p, from[i], to[i], pattern_seed(slot));
}

/* Check the pattern a block of old_size carried, limited to [0, limit). */
static uint64_t verify_block(const void *p, uint64_t old_size, uint64_t limit, uint32_t slot) {
  uint64_t from[2], to[2];
  int n = fill_windows(old_size, from, to);
  for (int i = 0; i < n; i++) {
    uint64_t hi = to[i] < limit ? to[i] : limit;
    if (from[i] >= hi) continue;
    uint64_t bad = verify_range(p, from[i], hi, pattern_seed(slot));
    if (bad != UINT64_MAX) return bad;
  }
  return UINT64_MAX;
}

/* ---- crash context --------------------------------------------------------- */

/* What the signal handler names: the trace, the policy and the phase (the
 * policy's init, the checked pass with its op, or a timed pass, whose loop
 * does not track ops so as not to time that too). */
enum { PHASE_NONE, PHASE_INIT, PHASE_CHECKED, PHASE_TIMED };
static const trace_t *volatile current_trace;
static const char *volatile current_policy;
static volatile size_t current_op;
static volatile int current_phase;
static volatile unsigned current_pass;

/* cfg->timeout_s of the run: each pass (init and checked pass together, or
 * one timed pass) must end within it, or SIGALRM goes off inside it; the
 * caller's handler names the op (driver_write_current_op). Without it, a
 * student's mm_malloc that loops for ever (--mm) hung the driver for ever. */
static unsigned pass_timeout_s;

static void set_phase(const trace_t *t, const lab_policy_t *pol, int phase, unsigned pass) {
  current_trace = t;
  current_policy = pol->name;
  current_phase = phase;
  current_pass = pass;
  if (pass_timeout_s) alarm(pass_timeout_s);
}

static void end_phase(void) {
  current_phase = PHASE_NONE;
  if (pass_timeout_s) alarm(0);
}

bool driver_in_replay(void) { return current_phase != PHASE_NONE; }

static void write_str(int fd, const char *s) {
  size_t n = 0;
  while (s[n]) n++;
  if (write(fd, s, n) < 0) return;
}

static void write_uint(int fd, uint64_t v) {
  char buf[24];
  int i = sizeof buf;
  do buf[--i] = (char)('0' + v % 10); while ((v /= 10) && i > 0);
  if (write(fd, buf + i, sizeof buf - (size_t)i) < 0) return;
}

void driver_write_current_op(int fd) {
  const trace_t *t = current_trace;
  int phase = current_phase;
  if (!t || phase == PHASE_NONE) {
    write_str(fd, "(outside any trace)");
    return;
  }
  write_str(fd, t->name);
  if (phase == PHASE_CHECKED && current_op < t->num_ops) {
    write_str(fd, ":");
    write_uint(fd, t->ops[current_op].line);
    write_str(fd, ": op ");
    write_uint(fd, current_op + 1);
  } else if (phase == PHASE_INIT) {
    write_str(fd, ": in the policy's init");
  } else if (phase == PHASE_TIMED) {
    write_str(fd, ": timed pass ");
    write_uint(fd, current_pass);
    write_str(fd, " (its checked pass was valid; timed passes do not track ops: an init that does not reset "
                  "all state, or a heap the last pass left behind, are the usual causes)");
  }
  write_str(fd, " (policy ");
  write_str(fd, current_policy ? current_policy : "?");
  write_str(fd, ")");
}

/* ---- the correctness pass -------------------------------------------------- */

static int op_error(driver_result_t *out, const trace_t *t, size_t i, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int op_error(driver_result_t *out, const trace_t *t, size_t i, const char *fmt, ...) {
  const trace_op_t *op = &t->ops[i];
  char what[400], req[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  long long id = (long long)t->slot_ids[op->slot];
  if (op->kind == TRACE_OP_FREE) snprintf(req, sizeof req, "f %lld", id);
  else snprintf(req, sizeof req, "%c %lld %llu", op->kind, id, (unsigned long long)op->size);
  snprintf(out->error, sizeof out->error, "%s:%u: op %zu (%s): %s", t->name, op->line, i + 1,
           req, what);
  out->valid = false;
  return 1;
}

/* Check a block the policy just returned and start tracking it. */
static int accept_block(driver_t *d, const lab_policy_t *pol, const trace_t *t, size_t i,
                        void *p, uint64_t size, size_t align, driver_result_t *out) {
  uintptr_t lo = (uintptr_t)p, hi = lo + (size ? size : 1);
  uint32_t slot = t->ops[i].slot;
  if (lo % align)
    return op_error(out, t, i, "payload %p is not %zu-byte aligned", p, align);
  if (!driver_is_system(pol)) {
    uintptr_t heap_lo = (uintptr_t)mem_heap_lo(), heap_hi = (uintptr_t)mem_heap_hi();
    if (mem_heapsize() == 0 || lo < heap_lo || hi - 1 > heap_hi || hi < lo)
      return op_error(out, t, i, "payload [%p, +%llu) lies outside the heap [%p, %p]", p,
                      (unsigned long long)size, mem_heap_lo(), mem_heap_hi());
  }
  int32_t other = live_find_overlap(d, lo, hi);
  if (other >= 0)
    return op_error(out, t, i, "payload [%p, +%llu) overlaps the live payload of id %lld [%p, +%llu)",
                    p, (unsigned long long)size, (long long)t->slot_ids[other],
                    d->ptr[other], (unsigned long long)d->size[other]);
  live_insert(d, (int32_t)slot, lo, hi);
  d->ptr[slot] = p;
  d->size[slot] = size;
  return 0;
}

/* Bytes a block needs beyond its payload, at most, in any lab policy: tags
 * (two 8-byte words in the wide format), alignment padding, a prologue or
 * epilogue. A request within this of the cap's remaining bytes may not fit
 * with them: out of memory, not the policy's fault. */
#define DRIVER_BLOCK_OVERHEAD_MAX 64

static int null_result(const lab_policy_t *pol, const trace_t *t, size_t i, uint64_t size,
                       driver_result_t *out) {
  size_t room = driver_is_system(pol) ? 0 : mem_cap() - mem_heapsize();
  if (!driver_is_system(pol) && size > room) {
    out->out_of_memory = true;
    return op_error(out, t, i, "out of memory: the heap (%zu bytes) cannot grow by %llu within "
                    "its cap of %zu bytes", mem_heapsize(), (unsigned long long)size, mem_cap());
  }
  if (!driver_is_system(pol) && size + DRIVER_BLOCK_OVERHEAD_MAX > room) {
    out->out_of_memory = true;
    return op_error(out, t, i, "out of memory: %zu bytes of the heap cap are left, too few for %llu bytes "
                    "and the block's tags and alignment", room, (unsigned long long)size);
  }
  if (driver_is_system(pol)) {  /* the system decides what fits: NULL is out of memory */
    int e = errno;
    out->out_of_memory = true;
    return op_error(out, t, i, "out of memory: the C library's allocator returned NULL (%s)",
                    strerror(e));
  }
  return op_error(out, t, i, "returned NULL with %zu bytes of heap cap still free",
                  mem_cap() - mem_heapsize());
}

/* How many ops apart the checker runs: check_every, stretched so that a
 * budget of B gives at most B runs per trace. The stride is rounded up, so
 * N ops give floor(N / ceil(N / B)) <= B runs; when that leaves ops after
 * the last run, it is below B and the run at the end still fits. */
static size_t checker_stride(const driver_config_t *cfg, size_t num_ops) {
  size_t every = cfg->check_every;
  if (!every || !cfg->check_budget) return every;
  size_t needed = num_ops / cfg->check_budget + (num_ops % cfg->check_budget != 0);
  return needed > every ? needed : every;
}

/* The policy's checker, counted (driver_result_t.checks) so a caller can
 * see what --check-budget allowed. */
static int run_checker(const lab_policy_t *pol, driver_result_t *out, char *err, size_t len) {
  out->checks++;
  return pol->check(err, len);
}

static int correctness_pass(driver_t *d, const lab_policy_t *pol, const trace_t *t,
                            const driver_config_t *cfg, size_t align, driver_result_t *out) {
  char check_err[256];
  d->root = -1;
  d->prio_state = 2463534242u;
  memset(d->ptr, 0, t->n_slots * sizeof *d->ptr);
  memset(d->size, 0, t->n_slots * sizeof *d->size);
  if (!driver_is_system(pol)) {
    mem_reset_brk();
    mem_guard(1); /* a write past the break faults here (memlib.c); the timed passes run unguarded */
  }
  set_phase(t, pol, PHASE_INIT, 0);
  if (pol->init(align) < 0) {
    snprintf(out->error, sizeof out->error, "%s: %s: init failed", t->name, pol->name);
    end_phase();
    if (!driver_is_system(pol)) mem_guard(0);
    return 1;
  }
  current_op = 0;
  current_phase = PHASE_CHECKED;
  size_t every = checker_stride(cfg, t->num_ops);
  int rc = 0;
  for (size_t i = 0; i < t->num_ops && rc == 0; i++) {
    current_op = i;
    const trace_op_t *op = &t->ops[i];
    uint32_t s = op->slot;
    void *old = d->ptr[s];
    uint64_t old_size = d->size[s];
    /* More than the whole cap can never fit: said up front, naming the
     * request, before a policy grows the heap towards the cap in pieces
     * (the "heap cannot grow" message would then quote that heap). */
    if (op->kind != TRACE_OP_FREE && !driver_is_system(pol) && op->size > mem_cap()) {
      out->out_of_memory = true;
      rc = op_error(out, t, i, "out of memory: a request of %llu bytes is larger than the whole heap "
                    "cap of %zu bytes (--heap-cap)", (unsigned long long)op->size, mem_cap());
      break;
    }
    switch (op->kind) {
    case TRACE_OP_ALLOC: {
      /* The id may still hold what realloc(p, 0) returned: the trace says
       * the id is NULL then (the C library it was recorded on returns NULL
       * and frees p), but a policy may return a minimal block instead, as C
       * allows. The program would leak that block here: so does the
       * replay, but it leaves the live set first. Before, its node was
       * inserted again while still in the treap, which made a cycle: the
       * next overlap search never ended. */
      if (old) live_remove(d, (int32_t)s);
      void *p = pol->malloc(op->size);
      if (!p) {
        if (op->size > 0) rc = null_result(pol, t, i, op->size, out);
        d->ptr[s] = NULL;
        d->size[s] = 0;
        break;
      }
      rc = accept_block(d, pol, t, i, p, op->size, align, out);
      if (rc == 0) fill_block(p, op->size, s);
      break;
    }
    case TRACE_OP_FREE:
      if (old) {
        uint64_t bad = verify_block(old, old_size, old_size, s);
        if (bad != UINT64_MAX) {
          rc = op_error(out, t, i, "payload of id %lld was overwritten at offset %llu while live",
                        (long long)t->slot_ids[s], (unsigned long long)bad);
          break;
        }
        live_remove(d, (int32_t)s);
      }
      pol->free(old);
      d->ptr[s] = NULL;
      d->size[s] = 0;
      break;
    case TRACE_OP_REALLOC: {
      void *p = pol->realloc(old, op->size);
      if (old) live_remove(d, (int32_t)s);
      d->ptr[s] = NULL;
      d->size[s] = 0;
      if (!p) {
        if (op->size > 0) rc = null_result(pol, t, i, op->size, out);
        break;
      }
      rc = accept_block(d, pol, t, i, p, op->size, align, out);
      if (rc) break;
      if (old) {
        uint64_t keep = old_size < op->size ? old_size : op->size;
        uint64_t bad = verify_block(p, old_size, keep, s);
        if (bad != UINT64_MAX) {
          rc = op_error(out, t, i, "realloc from %llu bytes did not preserve the contents "
                        "(first difference at offset %llu)", (unsigned long long)old_size,
                        (unsigned long long)bad);
          break;
        }
      }
      fill_block(p, op->size, s);
      break;
    }
    }
    if (rc == 0 && pol->check && every && (i + 1) % every == 0 &&
        run_checker(pol, out, check_err, sizeof check_err) != 0)
      rc = op_error(out, t, i, "heap check failed after this op: %s", check_err);
  }
  /* The checker always has the last word; when it ran after the last op
   * that was it (the same heap again would only cost a budgeted run). */
  bool checked_last = every && t->num_ops && t->num_ops % every == 0;
  if (rc == 0 && pol->check && !checked_last && run_checker(pol, out, check_err, sizeof check_err) != 0)
    snprintf(out->error, sizeof out->error, "%s: heap check failed at the end: %s", t->name,
             check_err), rc = 1;
  end_phase();
  if (!driver_is_system(pol)) mem_guard(0);
  out->heap_bytes = driver_is_system(pol) ? 0 : mem_heapsize();
  if (driver_is_system(pol)) {  /* what the trace left live */
    for (size_t s = 0; s < t->n_slots; s++) free(d->ptr[s]);
  }
  return rc;
}

/* ---- timed passes ------------------------------------------------------------ */

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One replay with no checks; -1 when init fails. The loop only calls the
 * policy and stores the result: nothing else allocates or branches on data. */
static double timed_pass(driver_t *d, const lab_policy_t *pol, const trace_t *t, size_t align, unsigned pass) {
  void **ptr = d->ptr;
  memset(ptr, 0, t->n_slots * sizeof *ptr);
  if (!driver_is_system(pol)) mem_reset_brk();
  set_phase(t, pol, PHASE_TIMED, pass);
  if (pol->init(align) < 0) {
    end_phase();
    return -1;
  }
  const trace_op_t *ops = t->ops;
  size_t n = t->num_ops;
  double start = now_seconds();
  for (size_t i = 0; i < n; i++) {
    const trace_op_t *op = &ops[i];
    switch (op->kind) {
    case TRACE_OP_ALLOC: ptr[op->slot] = pol->malloc(op->size); break;
    case TRACE_OP_FREE: pol->free(ptr[op->slot]); ptr[op->slot] = NULL; break;
    default: ptr[op->slot] = pol->realloc(ptr[op->slot], op->size); break;
    }
  }
  double secs = now_seconds() - start;
  end_phase();
  if (driver_is_system(pol))
    for (size_t s = 0; s < t->n_slots; s++) free(ptr[s]);
  return secs;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int driver_run(driver_t *d, const lab_policy_t *pol, const trace_t *t,
               const driver_config_t *cfg, driver_result_t *out) {
  memset(out, 0, sizeof *out);
  out->ops = t->num_ops;
  out->scored_util = t->weight == 1 || t->weight == 2;
  out->scored_thru = t->weight == 1 || t->weight == 3;
  size_t align = cfg->align ? cfg->align : (t->format == TRACE_FORMAT_CLASSIC ? 8 : 16);
  out->align = align;
  pass_timeout_s = cfg->timeout_s;
  if (reserve(d, t->n_slots ? t->n_slots : 1) < 0) {
    snprintf(out->error, sizeof out->error, "%s: out of memory for the driver's workspace",
             t->name);
    return -1;
  }
  if (correctness_pass(d, pol, t, cfg, align, out) != 0) return 1;
  out->valid = true;
  if (!driver_is_system(pol)) {
    out->has_util = true;
    out->util = out->heap_bytes ? (double)t->peak_live / (double)out->heap_bytes
                                : (t->peak_live ? 0.0 : 1.0);
  }
  if (cfg->check_only) return 0;

  unsigned runs = cfg->runs ? cfg->runs : 1;
  double secs[64];
  if (runs > 64) runs = 64;
  for (unsigned r = 0; r < runs; r++) {
    secs[r] = timed_pass(d, pol, t, align, r + 1);
    if (secs[r] < 0) {
      snprintf(out->error, sizeof out->error, "%s: %s: init failed", t->name, pol->name);
      out->valid = false;
      return 1;
    }
  }
  qsort(secs, runs, sizeof secs[0], cmp_double);
  out->secs = runs % 2 ? secs[runs / 2] : (secs[runs / 2 - 1] + secs[runs / 2]) / 2;
  out->timed = true;
  return 0;
}

void driver_totals(const driver_result_t *r, size_t n, double reference_kops,
                   driver_totals_t *out) {
  memset(out, 0, sizeof *out);
  out->all_valid = true;
  /* Weighted traces say which score they count for; when none of the given
   * traces counts for a score, every trace does (a lone weight-0 trace). */
  bool any_util = false, any_thru = false;
  for (size_t i = 0; i < n; i++) {
    if (!r[i].valid) out->all_valid = false;
    any_util |= r[i].scored_util;
    any_thru |= r[i].scored_thru;
  }
  double util_sum = 0;
  size_t util_n = 0;
  for (size_t i = 0; i < n; i++) {
    if (r[i].valid && r[i].has_util && (r[i].scored_util || !any_util)) {
      util_sum += r[i].util;
      util_n++;
    }
    if (r[i].valid && (r[i].scored_thru || !any_thru)) {
      out->ops += r[i].ops;
      if (r[i].timed) {
        out->secs += r[i].secs;
        out->has_thru = true;
      }
    }
  }
  out->has_util = util_n > 0;
  out->util = util_n ? util_sum / (double)util_n : 0;
  if (out->has_thru) out->kops = out->secs > 0 ? (double)out->ops / out->secs / 1000.0 : 0;
  if (!out->all_valid) {
    out->has_index = true;
    out->perf_index = 0;
  } else if (out->has_util && out->has_thru && reference_kops > 0) {
    double thru = out->kops / reference_kops;
    out->perf_index = 100.0 * (0.6 * out->util + 0.4 * (thru < 1 ? thru : 1));
    out->has_index = true;
  }
}
