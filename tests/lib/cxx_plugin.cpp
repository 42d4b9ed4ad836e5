// cxx_plugin.cpp — a C++ library that a C program loads at run time
// (cxx_plugin_host.c): python and its C++ extension modules, any plugin
// host. libstdc++ then arrives after the allocator, privately with
// RTLD_LOCAL (python's default) or into the global scope with RTLD_GLOBAL.
// Its operator new is libtessera's (preloaded, so first in the global
// scope), and a failing new must still behave as the standard says: the
// new_handler is called until it is gone, then std::bad_alloc is thrown,
// and the nothrow forms return nullptr. (Before, libtessera's references to
// libstdc++, bound when it was loaded, stayed null: every failing new
// aborted the process.)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "cxx_check.h"

static volatile std::size_t absurd = SIZE_MAX / 2;
static int handler_calls;
// Where blocks go, so that the compiler cannot leave a new-expression and
// its delete out (C++14 lets it).
static void *volatile keep;

// Gives up (uninstalls itself) at its second call.
static void giving_up_handler() {
  if (++handler_calls == 2) std::set_new_handler(nullptr);
}
static void throwing_handler() {
  ++handler_calls;
  throw std::bad_alloc();
}

template <typename F> static bool throws_bad_alloc(F f) {
  try {
    f();
  } catch (const std::bad_alloc &) {
    return true;
  }
  return false;
}

extern "C" int cxx_plugin_run(void) {
  // Ordinary use.
  std::vector<std::string> words;
  for (int i = 0; i < 1000; i++) words.push_back(std::string(40 + i % 50, static_cast<char>('a' + i % 26)));
  CHECK(words[999].size() == 40 + 999 % 50, "vector of strings damaged");
  char *plain = new char[100];
  keep = plain;
  std::memset(plain, 1, 100);
  delete[] plain;

  // Throwing forms: std::bad_alloc, after the handler gave up.
  handler_calls = 0;
  CHECK(throws_bad_alloc([] { keep = new char[absurd]; }), "new char[absurd] did not throw std::bad_alloc");
  std::set_new_handler(giving_up_handler);
  CHECK(throws_bad_alloc([] { ::operator delete(::operator new(absurd)); }) && handler_calls == 2,
        "new(absurd) with a handler: %d handler calls, want bad_alloc after 2", handler_calls);
  handler_calls = 0;
  std::set_new_handler(throwing_handler);
  CHECK(throws_bad_alloc([] { ::operator delete[](::operator new[](absurd)); }) && handler_calls == 1,
        "new[](absurd) with a throwing handler: %d calls", handler_calls);
  std::set_new_handler(nullptr);
  CHECK(throws_bad_alloc([] { ::operator delete(::operator new(absurd, std::align_val_t(64)), std::align_val_t(64)); }),
        "aligned new(absurd) did not throw std::bad_alloc");
  handler_calls = 0;
  std::set_new_handler(giving_up_handler);
  CHECK(throws_bad_alloc([] { ::operator delete(::operator new(64, std::align_val_t(24))); }) && handler_calls == 0,
        "new(64, align 24): %d handler calls, want bad_alloc at once", handler_calls);
  std::set_new_handler(nullptr);

  // Nothrow forms: nullptr, after the handler gave up.
  void *none = ::operator new(absurd, std::nothrow);
  CHECK(none == nullptr, "nothrow new(absurd) = %p", none);
  handler_calls = 0;
  std::set_new_handler(giving_up_handler);
  none = ::operator new[](absurd, std::nothrow);
  CHECK(none == nullptr && handler_calls == 2, "nothrow new[](absurd) = %p after %d handler calls, want nullptr after 2",
        none, handler_calls);
  handler_calls = 0;
  std::set_new_handler(giving_up_handler);
  none = ::operator new(absurd, std::align_val_t(128), std::nothrow);
  CHECK(none == nullptr && handler_calls == 2, "nothrow aligned new(absurd) = %p after %d handler calls", none,
        handler_calls);
  handler_calls = 0;
  std::set_new_handler(giving_up_handler);
  none = ::operator new[](64, std::align_val_t(48), std::nothrow);
  CHECK(none == nullptr && handler_calls == 0, "nothrow new[](64, align 48) = %p after %d handler calls", none,
        handler_calls);
  std::set_new_handler(nullptr);
  void *some = ::operator new(64, std::nothrow);
  CHECK(some != nullptr, "nothrow new(64) failed");
  ::operator delete(some);
  some = ::operator new(100, std::align_val_t(256), std::nothrow);
  CHECK(some != nullptr && reinterpret_cast<std::uintptr_t>(some) % 256 == 0, "nothrow new(100, align 256) = %p", some);
  ::operator delete(some, std::align_val_t(256));
  return failures;
}
