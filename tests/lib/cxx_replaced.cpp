// cxx_replaced.cpp — a program that replaces only the plain operator new and
// operator delete (with a pool of its own, not malloc), as the standard
// allows: every other form it leaves to the library must reach its two
// ([new.delete]: new[] calls operator new, the nothrow forms call the
// throwing ones, the sized and array deletes call operator delete(void *)).
// libstdc++ does so; libtessera, preloaded or linked, must too. Before, its
// sized delete (what `delete p` calls since C++14) and its array and nothrow
// forms went to tessera: the pool's blocks were "invalid free"s (abort)
// under LD_PRELOAD, and libtessera.a did not link ("multiple definition of
// operator new(unsigned long)").
//
// Built without libtessera and run under LD_PRELOAD (lib.cxx_replaced.preload
// and .secure), and linked with libtessera.a at test time
// (lib.cxx_replaced.static_archive). With --expect-tessera it also checks
// that the forms it does not replace (aligned new) are tessera's.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

// Replacing the unsized delete alone is the point (gcc warns about it).
#pragma GCC diagnostic ignored "-Wsized-deallocation"

#include "cxx_check.h"

alignas(64) static unsigned char pool[1 << 20];
static std::size_t pool_used;
static int pool_news, pool_deletes;

static bool in_pool(const void *p) {
  return static_cast<const unsigned char *>(p) >= pool && static_cast<const unsigned char *>(p) < pool + sizeof pool;
}

void *operator new(std::size_t n) {
  n = (n + 15) & ~static_cast<std::size_t>(15);
  if (n > sizeof pool - pool_used) throw std::bad_alloc();
  void *p = pool + pool_used;
  pool_used += n ? n : 16;
  pool_news++;
  return p;
}

void operator delete(void *p) noexcept {
  if (p == nullptr) return;
  if (!in_pool(p)) {
    std::fprintf(stderr, "FATAL: operator delete(%p): not a block of this program's pool\n", p);
    std::abort();
  }
  pool_deletes++;
}

struct Thing {
  long a[5];
};

// Sizes hidden from the optimiser.
static volatile std::size_t pool_size = sizeof pool;

int main(int argc, char **argv) {
  bool expect_tessera = argc > 1 && std::strcmp(argv[1], "--expect-tessera") == 0;

  // new / delete of an object: delete is the sized operator delete.
  Thing *t = new Thing;
  CHECK(in_pool(t), "new Thing = %p, not from the program's operator new", static_cast<void *>(t));
  delete t;
  CHECK(pool_news == 1 && pool_deletes == 1, "new/delete: %d news, %d deletes, want 1 and 1", pool_news, pool_deletes);

  // Arrays: operator new[] calls operator new, delete[] calls operator delete.
  int *a = new int[10];
  CHECK(in_pool(a), "new int[10] = %p, not from the program's operator new", static_cast<void *>(a));
  delete[] a;
  void *raw = ::operator new[](100);
  CHECK(in_pool(raw), "operator new[](100) = %p", raw);
  ::operator delete[](raw, 100);  // sized array delete
  raw = ::operator new(48);
  ::operator delete(raw, 48);  // sized delete, explicitly
  CHECK(pool_news == 4 && pool_deletes == 4, "arrays/sized: %d news, %d deletes, want 4 and 4", pool_news,
        pool_deletes);

  // Nothrow forms: through operator new, and nullptr when it throws.
  Thing *n = new (std::nothrow) Thing;
  CHECK(in_pool(n), "new (nothrow) Thing = %p", static_cast<void *>(n));
  delete n;
  raw = ::operator new[](64, std::nothrow);
  CHECK(in_pool(raw), "operator new[](64, nothrow) = %p", raw);
  ::operator delete[](raw, std::nothrow);
  raw = ::operator new(64, std::nothrow);
  ::operator delete(raw, std::nothrow);
  CHECK(pool_news == 7 && pool_deletes == 7, "nothrow: %d news, %d deletes, want 7 and 7", pool_news,
        pool_deletes);
  void *none = ::operator new(pool_size, std::nothrow);
  CHECK(none == nullptr, "nothrow new beyond the pool = %p, want nullptr (operator new threw)", none);
  none = ::operator new[](pool_size, std::nothrow);
  CHECK(none == nullptr, "nothrow new[] beyond the pool = %p, want nullptr", none);

  // Aligned forms are not replaced: the library's (tessera's when preloaded).
  void *al = ::operator new(200, std::align_val_t(256));
  CHECK(al != nullptr && !in_pool(al) && (reinterpret_cast<std::uintptr_t>(al) & 255) == 0, "new(200, align 256) = %p",
        al);
  if (expect_tessera) {
    typedef std::size_t usable_fn(const void *);
    usable_fn *usable = reinterpret_cast<usable_fn *>(dlsym(RTLD_DEFAULT, "tes_usable_size"));
    CHECK(usable == nullptr || usable(al) >= 200, "aligned new not served by libtessera");
  }
  ::operator delete(al, 200, std::align_val_t(256));
  al = ::operator new[](100, std::align_val_t(64), std::nothrow);
  CHECK(al != nullptr && !in_pool(al), "new[](100, align 64, nothrow) = %p", al);
  ::operator delete[](al, std::align_val_t(64), std::nothrow);
  CHECK(pool_news == 7 && pool_deletes == 7, "aligned forms reached the pool: %d news, %d deletes", pool_news,
        pool_deletes);

  // The C side is still the library's.
  void *m = std::malloc(100);
  CHECK(m != nullptr && !in_pool(m), "malloc(100) = %p", m);
  std::free(m);

  if (failures) {
    std::fprintf(stderr, "cxx_replaced: %d check(s) failed\n", failures);
    return failures > 99 ? 99 : failures;
  }
  std::printf("cxx_replaced: all checks passed\n");
  return 0;
}
