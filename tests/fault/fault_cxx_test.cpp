/* fault_cxx_test.cpp — the C++ allocation operators under injected faults.
 *
 * Linked with the tessera_fault library, whose operator new/delete replace
 * the C++ runtime's. With every mmap failing: plain, array and aligned
 * operator new throw std::bad_alloc; the nothrow forms return nullptr; the
 * objects allocated before are intact; after tes_fault_clear() every form
 * works again. CTest: fault.cxx_new. */
#include "fault_common.h"

#include "fault.h"
#include "tessera.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace {

constexpr std::size_t MiB = std::size_t(1) << 20;

fault_block_t live[20000];
std::size_t live_count;

void verify_live() {
  for (std::size_t i = 0; i < live_count; i++) CHECK(fault_intact(&live[i]));
}

/* Calls `attempt` until it throws std::bad_alloc (it must, within `limit`
 * calls); blocks it returns stay live and are verified afterwards. */
template <typename F>
void expect_bad_alloc_within(int limit, std::size_t size, F attempt) {
  for (int i = 0; i < limit; i++) {
    unsigned char *p;
    try {
      p = attempt(size);
    } catch (const std::bad_alloc &) {
      verify_live();
      return;
    }
    CHECK(live_count < sizeof live / sizeof live[0]);
    fault_block_t *b = &live[live_count++];
    b->ptr = p;
    b->size = size;
    b->seed = static_cast<uint32_t>(live_count);
    fault_fill(b);
  }
  std::fprintf(stderr, "operator new(%zu) never threw with every mmap failing\n", size);
  std::exit(1);
}

}  // namespace

int main() {
  for (int i = 0; i < 500; i++) {
    fault_block_t *b = &live[live_count++];
    b->size = 100;
    b->ptr = new unsigned char[b->size];
    b->seed = static_cast<uint32_t>(live_count);
    fault_fill(b);
  }
  uint64_t before = tes_fault_injected();
  tes_fault_fail_always(TES_FAULT_MMAP, true);

  /* Large requests need a fresh mapping: they fail at once. */
  bool threw = false;
  try {
    unsigned char *p = new unsigned char[64 * MiB];
    delete[] p;
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  CHECK(threw);
  CHECK(new (std::nothrow) unsigned char[64 * MiB] == nullptr);
  threw = false;
  try {
    void *p = ::operator new(64 * MiB, std::align_val_t(1 * MiB));
    ::operator delete(p, std::align_val_t(1 * MiB));
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  CHECK(threw);
  CHECK(::operator new(64 * MiB, std::align_val_t(4096), std::nothrow) == nullptr);
  CHECK(tes_fault_injected() > before);

  /* Small requests fail once the existing segments are full. */
  expect_bad_alloc_within(20000, 4000, [](std::size_t n) { return new unsigned char[n]; });
  expect_bad_alloc_within(20000, 4000, [](std::size_t n) {
    return static_cast<unsigned char *>(::operator new[](n));
  });
  {
    int nulls = 0;
    for (int i = 0; i < 20000 && nulls == 0; i++) {
      unsigned char *p = new (std::nothrow) unsigned char[4000];
      if (p == nullptr) {
        nulls++;
        continue;
      }
      CHECK(live_count < sizeof live / sizeof live[0]);
      live[live_count] = fault_block_t{p, 4000, static_cast<uint32_t>(live_count + 1)};
      fault_fill(&live[live_count++]);
    }
    CHECK(nulls == 1);
  }
  verify_live();

  tes_fault_clear();
  unsigned char *big = new unsigned char[64 * MiB];
  std::memset(big, 0x44, 64 * MiB);
  delete[] big;
  void *aligned = ::operator new(64 * MiB, std::align_val_t(1 * MiB));
  CHECK((reinterpret_cast<uintptr_t>(aligned) & (1 * MiB - 1)) == 0);
  ::operator delete(aligned, std::align_val_t(1 * MiB));
  for (int i = 0; i < 1000; i++) {
    auto *p = new (std::nothrow) unsigned char[4000];
    CHECK(p != nullptr);
    delete[] p;
  }
  verify_live();
  for (std::size_t i = 0; i < live_count; i++) delete[] live[i].ptr;
  std::printf("fault.cxx_new: ok (%llu failures injected)\n",
              static_cast<unsigned long long>(tes_fault_injected()));
  return 0;
}
