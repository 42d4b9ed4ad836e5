// override_new.cpp — every C++ operator new/delete form (drop-in builds only).
//
// Plain, array, nothrow, sized, aligned (C++17) and their combinations all
// go to the tes_* functions, so C++ programs get the same fast paths.
// Failure follows the standard: call the installed new_handler and retry;
// without one, the throwing forms throw std::bad_alloc and the nothrow forms
// return nullptr. libstdc++ is only used for bad_alloc and the handler, never
// for allocation.
#include <cerrno>
#include <cstddef>
#include <new>

extern "C" {
void *tes_malloc(std::size_t size);
void tes_free(void *p);
void *tes_aligned_alloc(std::size_t alignment, std::size_t size);
}

#define EXPORT __attribute__((visibility("default")))

namespace {

void *allocate(std::size_t size, std::size_t alignment) {
  return alignment <= 16 ? tes_malloc(size) : tes_aligned_alloc(alignment, size);
}

void *allocate_or_throw(std::size_t size, std::size_t alignment) {
  void *p = allocate(size, alignment);
  while (__builtin_expect(p == nullptr, 0)) {
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
    p = allocate(size, alignment);
  }
  return p;
}

void *allocate_nothrow(std::size_t size, std::size_t alignment) noexcept {
  void *p = allocate(size, alignment);
  while (__builtin_expect(p == nullptr, 0)) {
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) return nullptr;
    try {
      handler();
    } catch (...) {
      return nullptr;
    }
    p = allocate(size, alignment);
  }
  return p;
}

}  // namespace

EXPORT void *operator new(std::size_t n) { return allocate_or_throw(n, 0); }
EXPORT void *operator new[](std::size_t n) { return allocate_or_throw(n, 0); }
EXPORT void *operator new(std::size_t n, const std::nothrow_t &) noexcept { return allocate_nothrow(n, 0); }
EXPORT void *operator new[](std::size_t n, const std::nothrow_t &) noexcept { return allocate_nothrow(n, 0); }
EXPORT void *operator new(std::size_t n, std::align_val_t a) { return allocate_or_throw(n, (std::size_t)a); }
EXPORT void *operator new[](std::size_t n, std::align_val_t a) { return allocate_or_throw(n, (std::size_t)a); }
EXPORT void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return allocate_nothrow(n, (std::size_t)a);
}
EXPORT void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return allocate_nothrow(n, (std::size_t)a);
}

EXPORT void operator delete(void *p) noexcept { tes_free(p); }
EXPORT void operator delete[](void *p) noexcept { tes_free(p); }
EXPORT void operator delete(void *p, const std::nothrow_t &) noexcept { tes_free(p); }
EXPORT void operator delete[](void *p, const std::nothrow_t &) noexcept { tes_free(p); }
EXPORT void operator delete(void *p, std::size_t) noexcept { tes_free(p); }
EXPORT void operator delete[](void *p, std::size_t) noexcept { tes_free(p); }
EXPORT void operator delete(void *p, std::align_val_t) noexcept { tes_free(p); }
EXPORT void operator delete[](void *p, std::align_val_t) noexcept { tes_free(p); }
EXPORT void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { tes_free(p); }
EXPORT void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept { tes_free(p); }
EXPORT void operator delete(void *p, std::size_t, std::align_val_t) noexcept { tes_free(p); }
EXPORT void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { tes_free(p); }
