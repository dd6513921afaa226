// The CUDA emulator's asynchronous copies into shared memory, written from the PTX ISA: cp.async with
// its groups, mbarrier, and cp.async.bulk (tensor_maps.cpp adds the tensor form). Each copy lands at
// the latest moment the ISA allows, its destination poisoned until then; simt.cpp's scheduler delivers
// the bulk copies when no thread can go on without them.
#include "emulator/simt_internal.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace brigade::emu {

// cp.async as the PTX ISA defines it (section "Data Movement and Conversion Instructions:
// cp.async"): the copy runs in the background and is guaranteed to have landed only once a
// cp.async.wait_group of the issuing thread has retired its group; until then the destination is
// undefined, and other threads see it only after that wait and a barrier. The emulator takes each
// rule at its strictest, so a kernel that relies on anything more fails here as it could on a GPU:
// the destination is poisoned (all bits set: NaN in every float format) when the copy is issued,
// and the bytes land at the latest moment allowed — the wait that retires the group. A missing
// wait reads the poison; a copy issued into a buffer another warp still reads (a missing barrier
// before the refill) poisons what that warp reads next.
void cp_async_16(uint32_t dst, const void* src, int bytes) {
  if (bytes < 0 || bytes > 16) kernel_fault("cp.async with a source size of " + std::to_string(bytes) + " bytes");
  if (reinterpret_cast<uintptr_t>(src) % 16 != 0 || dst % 16 != 0)
    kernel_fault("cp.async.cg with an address that is not 16-byte aligned");
  // The PTX ISA says only `bytes` bytes are read, the rest zero-filled; compute-sanitizer's memcheck
  // nevertheless reports all 16 as read (seen on an H200 for a 2-byte tensor, 2026-11-26), so the
  // emulator holds kernels to the stricter rule: the whole window lies inside one allocation.
  if (std::string error = check_global_range("cp.async.cg's 16-byte source", src, 16); !error.empty())
    kernel_fault(error);
  note_shared(dst, true, "cp.async");
  PendingCopy copy{dst, {}, -1};
  std::memcpy(copy.bytes, src, size_t(bytes));  // the rest stays zero: the zero-fill
  running->current->copies.push_back(copy);
  std::memset(shared_pointer(dst), 0xff, 16);
}

void cp_async_commit() {
  // Closes a group of every copy issued since the last commit; an empty group is a group too
  // (wait_group counts it), as the ISA says.
  Fiber& f = *running->current;
  for (PendingCopy& c : f.copies)
    if (c.group < 0) c.group = f.groups;
  ++f.groups;
}

void cp_async_wait(int pending) {
  Fiber& f = *running->current;
  const int retired_below = f.groups - pending;  // groups [0, retired_below) must have landed
  size_t kept = 0;
  for (PendingCopy& c : f.copies) {
    if (c.group >= 0 && c.group < retired_below) {
      note_shared(c.dst, true, "cp.async (landing)");
      std::memcpy(shared_pointer(c.dst), c.bytes, 16);
    } else {
      f.copies[kept++] = c;
    }
  }
  f.copies.resize(kept);
}

// ---- mbarrier and cp.async.bulk (the PTX ISA's "mbarrier" and "cp.async.bulk" sections) ----
// The barrier's state lives beside shared memory, keyed by its address, rather than in its 8 bytes:
// PTX leaves that encoding opaque, and a kernel must not read it.

static MBarrier& barrier_at(uint32_t bar, const char* instruction) {
  if (bar % 8 != 0) kernel_fault(std::string(instruction) + " on a shared address that is not 8-byte aligned");
  auto it = running->barriers.find(bar);
  if (it == running->barriers.end())
    kernel_fault(std::string(instruction) + " on shared address " + std::to_string(bar) +
                 ", where no mbarrier.init has made an mbarrier");
  MBarrier& m = it->second;
  // The initialising thread's write must be made visible to the others (a __syncthreads after it).
  if (m.init_epoch == running->epoch && m.init_thread != running->current)
    kernel_fault(std::string(instruction) + " by thread " + describe(running->current->index) +
                 " on an mbarrier another thread initialised with no __syncthreads since");
  return m;
}

// The PTX ISA's range for a tx-count: +-(2^20 - 1).
void check_tx_range(const MBarrier& m, const char* instruction) {
  constexpr int64_t kLimit = (int64_t(1) << 20) - 1;
  if (m.tx > kLimit || m.tx < -kLimit)
    kernel_fault(std::string(instruction) + " takes an mbarrier's tx-count to " + std::to_string(m.tx) +
                 " (the PTX ISA's range is +-(2^20 - 1))");
}

void mbarrier_init(uint32_t bar, uint32_t count) {
  if (bar % 8 != 0) kernel_fault("mbarrier.init on a shared address that is not 8-byte aligned");
  if (count < 1 || count > (1u << 20) - 1)
    kernel_fault("mbarrier.init with a count of " + std::to_string(count) + " (the PTX ISA allows 1 to 2^20 - 1)");
  running->barriers[bar] = MBarrier{count, count, 0, 0, running->epoch, running->current};
}

uint64_t mbarrier_arrive_expect_tx(uint32_t bar, uint32_t tx_bytes) {
  MBarrier& m = barrier_at(bar, "mbarrier.arrive");
  if (m.pending == 0)
    kernel_fault("mbarrier.arrive on a barrier whose phase has all its arrivals (it waits for " +
                 std::to_string(m.tx) + " more transaction bytes): more arrivals than its count");
  const uint64_t state = m.phase;  // the token names the phase arrived on
  m.tx += tx_bytes;
  check_tx_range(m, "mbarrier.arrive.expect_tx");
  --m.pending;
  complete_phase_if_done(m);
  // Nothing orders the arriving thread's next steps after the waiters' wake-up: the emulator lets the
  // waiters go first (a producer refilling a buffer the moment its last reader arrives), the order
  // that exposes a reader which arrived before it was really done with the buffer.
  if (m.phase != state) park(State::yielded);
  return state;
}

bool mbarrier_try_wait_parity(uint32_t bar, uint32_t parity) {
  const MBarrier& m = barrier_at(bar, "mbarrier.try_wait.parity");
  if (parity > 1) kernel_fault("mbarrier.try_wait.parity with a phase parity of " + std::to_string(parity) + " (0 or 1)");
  if (m.phase % 2 != parity) return true;  // the phase of that parity has completed
  // Not yet: the thread sleeps until it does (try_wait may wait; a GPU gives up after a time limit
  // and returns false, and the kernel's loop tries again — the same thing, seen from the kernel).
  Fiber& f = *running->current;
  f.wait_bar = bar;
  f.wait_parity = parity;
  park(State::at_mbarrier);
  return true;
}

void cp_async_bulk_to_shared(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  if (bytes % 16 != 0)
    kernel_fault("cp.async.bulk of " + std::to_string(bytes) + " bytes (the size must be a multiple of 16)");
  if (bytes > 227 * 1024)
    kernel_fault("cp.async.bulk of " + std::to_string(bytes) + " bytes: more than a block's shared memory (227 KiB)");
  if (dst % 16 != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0)
    kernel_fault("cp.async.bulk with an address that is not 16-byte aligned");
  if (std::string error = check_global_range("cp.async.bulk's source", src, bytes); !error.empty())
    kernel_fault(error);
  SharedRun run{dst, std::vector<unsigned char>(bytes)};
  std::memcpy(run.bytes.data(), src, bytes);
  std::vector<SharedRun> runs;
  runs.push_back(std::move(run));
  queue_bulk_copy(std::move(runs), bar, "cp.async.bulk");
}

void queue_bulk_copy(std::vector<SharedRun> runs, uint32_t bar, const char* instruction) {
  barrier_at(bar, (std::string(instruction) + "'s mbarrier::complete_tx").c_str());
  size_t bytes = 0;
  for (const SharedRun& run : runs) {
    const int64_t dst = int32_t(run.dst), size = int64_t(run.bytes.size());
    for (const auto& [at, m] : running->barriers)  // the emulator's barriers live beside their 8 bytes
      if (int64_t(int32_t(at)) - dst < size && dst - int64_t(int32_t(at)) < 8)
        kernel_fault(std::string(instruction) + " into shared bytes [" + std::to_string(run.dst) + ", +" +
                     std::to_string(size) + ") that hold the mbarrier at " + std::to_string(at));
    std::memset(shared_pointer(run.dst), 0xff, run.bytes.size());  // undefined until the phase completes
    bytes += run.bytes.size();
  }
  running->bulk_copies.push_back(BulkCopy{bar, std::move(runs), bytes});
}

}  // namespace brigade::emu
