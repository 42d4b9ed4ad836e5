// override_new.cpp — every C++ operator new/delete form (drop-in builds only).
//
// Plain, array, nothrow, sized, aligned (C++17) and their combinations all
// end in plain or aligned new/delete (below), which inline the fast paths,
// so C++ programs get the same fast paths. Failure follows the standard:
// call the installed new_handler and retry; without one, the throwing forms
// throw std::bad_alloc and the nothrow forms return nullptr.
//
// The library does not link libstdc++: a C program preloading libtessera
// would otherwise map all of it (about 1.3 MiB more RSS per process). The
// two libstdc++ functions needed (std::get_new_handler and
// std::__throw_bad_alloc) are weak references; in a C++ program libstdc++
// is loaded with it and they resolve. In a C program that loads a C++
// library later (python's extension modules) they are looked up when a
// `new` fails (runtime_symbol, below).
// Compiled with -fexceptions: we throw through libstdc++'s own function, and
// the nothrow forms catch what the throwing ones throw (below).
#include <dlfcn.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <new>

extern "C" {
// alloc.c's tes_malloc, tes_free and tes_aligned_alloc under hidden names:
// the fast paths inlined, no PLT hop.
void *tes_cxx_malloc(std::size_t size) noexcept;
void tes_cxx_free(void *p) noexcept;
void *tes_cxx_aligned_alloc(std::size_t alignment, std::size_t size) noexcept;
}

// libstdc++'s std::get_new_handler() and std::__throw_bad_alloc(), weakly.
extern std::new_handler tes_cxx_get_new_handler() __asm__("_ZSt15get_new_handlerv") __attribute__((weak));
[[noreturn]] extern void tes_cxx_throw_bad_alloc() __asm__("_ZSt17__throw_bad_allocv") __attribute__((weak));
// The nothrow forms catch what a new_handler throws, which needs libstdc++'s
// personality routine and catch functions: weak as well (a declaration
// cannot make the compiler's own reference to the personality weak; the
// assembler directive can). Only a handler can throw, and a handler exists
// only in a C++ program, where they resolve.
__asm__(".weak __gxx_personality_v0\n.weak __cxa_begin_catch\n.weak __cxa_end_catch");
// Weak as well, so that a fully static program links without them; in a
// dynamic one they are libc's (glibc >= 2.34). dlopen is looked up through
// dlsym instead: glibc's static dlopen carries a link-time warning, which
// even a weak reference set off in static programs that use dlsym.
#pragma weak dlsym
#pragma weak dlclose

#define EXPORT __attribute__((visibility("default")))

namespace {

void *allocate(std::size_t size, std::size_t alignment) {
  return alignment <= 16 ? tes_cxx_malloc(size) : tes_cxx_aligned_alloc(alignment, size);
}

// The weak references above are bound once, when libtessera is loaded. A C
// program (python, a plugin host) that later dlopens a C++ library had them
// null for good, so that library's failing `new` aborted instead of throwing
// std::bad_alloc, and never called its new_handler. Where libstdc++ was not
// there at load time, its functions are looked up when a `new` fails (rare:
// no cost on success): in the global scope, else in libstdc++ loaded
// privately (RTLD_LOCAL, as python loads extension modules, and their
// dependencies with them). Null when there is no libstdc++ in the process.
bool runtime_bound_at_load() { return tes_cxx_throw_bad_alloc != nullptr; }

void *runtime_symbol(const char *name) {
  if (dlsym == nullptr || dlclose == nullptr) return nullptr;
  void *fn = dlsym(RTLD_DEFAULT, name);
  auto open = reinterpret_cast<void *(*)(const char *, int)>(dlsym(RTLD_DEFAULT, "dlopen"));
  if (fn == nullptr && open != nullptr) {
    void *lib = open("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (lib != nullptr) {
      fn = dlsym(lib, name);
      dlclose(lib); /* only the reference NOLOAD took: the library stays */
    }
  }
  return fn;
}

std::new_handler current_handler() {
  if (tes_cxx_get_new_handler) return tes_cxx_get_new_handler();
  auto get = reinterpret_cast<std::new_handler (*)()>(runtime_symbol("_ZSt15get_new_handlerv"));
  return get ? get() : nullptr;
}

[[noreturn]] void throw_bad_alloc() {
  if (tes_cxx_throw_bad_alloc) tes_cxx_throw_bad_alloc();
  auto raise = reinterpret_cast<void (*)()>(runtime_symbol("_ZSt17__throw_bad_allocv"));
  if (raise) raise();
  std::abort(); /* operator new called without libstdc++ in the process */
}

void *allocate_or_throw(std::size_t size, std::size_t alignment) {
  void *p = allocate(size, alignment);
  while (__builtin_expect(p == nullptr, 0)) {
    std::new_handler handler = current_handler();
    if (handler == nullptr) throw_bad_alloc();
    handler();
    p = allocate(size, alignment);
  }
  return p;
}

// The nothrow forms when libstdc++ came after libtessera: their catch needs
// the personality routine, whose reference was bound (to null) at load as
// well, so nothing thrown would be caught here. The standard's loop without
// the exception: the handler until it is gone, then nullptr. (A handler
// that throws goes through to the caller in that case.)
void *allocate_or_null(std::size_t size, std::size_t alignment) {
  void *p = allocate(size, alignment);
  while (__builtin_expect(p == nullptr, 0)) {
    std::new_handler handler = current_handler();
    if (handler == nullptr) return nullptr;
    handler();
    p = allocate(size, alignment);
  }
  return p;
}

bool valid_alignment(std::size_t alignment) { return alignment != 0 && (alignment & (alignment - 1)) == 0; }

}  // namespace

// Replaceable, as the standard makes them: a program may define any subset
// of these, and the forms it leaves to us must then reach its own. So only
// four are allocators here: plain and aligned new and delete. Every other
// form forwards to one of those, as the standard's "default behavior" says
// and libstdc++ does (new[] calls new, the nothrow forms call the throwing
// ones and catch, a sized or array delete calls the plain delete), through
// the symbol, so a program's own operator new/delete gets them. Before, a
// program that replaced only operator new(size_t) and operator delete(void*)
// with a pool of its own had its `delete p` (a sized delete since C++14)
// freed by tessera: "invalid free", abort, under LD_PRELOAD.
//
// All are weak: linked statically (libtessera.a), the program's own
// definitions win instead of clashing with these ("multiple definition of
// operator new(unsigned long)"), as they do with libstdc++.a, whose
// operators each sit in an object of their own. A weak definition is also
// never bound locally by the compiler, so the forwarding calls below go
// through the symbol (the PLT in libtessera.so) and reach the program's.
#define REPLACEABLE EXPORT __attribute__((weak))

REPLACEABLE void *operator new(std::size_t n) { return allocate_or_throw(n, 0); }
// An alignment that is not a power of two (0 included) cannot be honoured:
// bad_alloc at once, as libstdc++ does, and the nothrow forms (which call
// this one) return nullptr. Before, alignments up to 16 returned a plain
// block and larger ones called the new_handler in a loop for a request
// that can never succeed (for ever, with a handler that always returns).
REPLACEABLE void *operator new(std::size_t n, std::align_val_t a) {
  if (!valid_alignment((std::size_t)a)) throw_bad_alloc();
  return allocate_or_throw(n, (std::size_t)a);
}
REPLACEABLE void operator delete(void *p) noexcept { tes_cxx_free(p); }
REPLACEABLE void operator delete(void *p, std::align_val_t) noexcept { tes_cxx_free(p); }

REPLACEABLE void *operator new[](std::size_t n) { return ::operator new(n); }
REPLACEABLE void *operator new[](std::size_t n, std::align_val_t a) { return ::operator new(n, a); }
REPLACEABLE void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
  if (!runtime_bound_at_load()) return allocate_or_null(n, 0);
  try {
    return ::operator new(n);
  } catch (...) {
    return nullptr;
  }
}
REPLACEABLE void *operator new[](std::size_t n, const std::nothrow_t &) noexcept {
  if (!runtime_bound_at_load()) return allocate_or_null(n, 0);
  try {
    return ::operator new[](n);
  } catch (...) {
    return nullptr;
  }
}
REPLACEABLE void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  if (!runtime_bound_at_load()) return valid_alignment((std::size_t)a) ? allocate_or_null(n, (std::size_t)a) : nullptr;
  try {
    return ::operator new(n, a);
  } catch (...) {
    return nullptr;
  }
}
REPLACEABLE void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  if (!runtime_bound_at_load()) return valid_alignment((std::size_t)a) ? allocate_or_null(n, (std::size_t)a) : nullptr;
  try {
    return ::operator new[](n, a);
  } catch (...) {
    return nullptr;
  }
}

REPLACEABLE void operator delete[](void *p) noexcept { ::operator delete(p); }
REPLACEABLE void operator delete(void *p, const std::nothrow_t &) noexcept { ::operator delete(p); }
REPLACEABLE void operator delete[](void *p, const std::nothrow_t &) noexcept { ::operator delete[](p); }
REPLACEABLE void operator delete(void *p, std::size_t) noexcept { ::operator delete(p); }
REPLACEABLE void operator delete[](void *p, std::size_t) noexcept { ::operator delete[](p); }
REPLACEABLE void operator delete[](void *p, std::align_val_t a) noexcept { ::operator delete(p, a); }
REPLACEABLE void operator delete(void *p, std::align_val_t a, const std::nothrow_t &) noexcept {
  ::operator delete(p, a);
}
REPLACEABLE void operator delete[](void *p, std::align_val_t a, const std::nothrow_t &) noexcept {
  ::operator delete[](p, a);
}
REPLACEABLE void operator delete(void *p, std::size_t, std::align_val_t a) noexcept { ::operator delete(p, a); }
REPLACEABLE void operator delete[](void *p, std::size_t, std::align_val_t a) noexcept { ::operator delete[](p, a); }
