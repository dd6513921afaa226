// What the CUDA emulator's device-side files share: the block being run, its fibers and its
// barriers. simt.cpp schedules the fibers; the instruction models (async_copies.cpp, mma.cpp,
// shared_memory_races.cpp) act on the running thread through it. Internal to them: kernels see
// simt.h only.
#pragma once

#include <setjmp.h>
#include <ucontext.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "emulator/simt.h"

namespace brigade::emu {

constexpr int kWarp = 32;

// yielded: the thread completed an mbarrier phase and lets the threads that waited for it run first.
enum class State { runnable, at_block_barrier, at_warp_barrier, at_mbarrier, yielded, done };

// A cp.async this thread issued that has not landed yet: the 16 bytes it will write, read from
// global memory at issue, and its group (-1 until cp.async.commit_group closes one).
struct PendingCopy {
  uint32_t dst;
  unsigned char bytes[16];
  int group;
};

struct Fiber {
  jmp_buf resume;  // where a parked fiber continues
  void* fake_stack = nullptr;  // ASan's bookkeeping while parked
  bool started = false;
  uint3 index;
  int warp = 0, lane = 0;
  State state = State::runnable;
  std::vector<PendingCopy> copies;  // cp.async copies in flight, oldest first
  int groups = 0;                   // cp.async groups committed so far
  uint32_t wait_bar = 0, wait_parity = 0;  // at_mbarrier: the barrier and the phase parity it waits for
};

// An mbarrier as the PTX ISA defines it ("Parallel Synchronization and Communication Instructions:
// mbarrier"): the current phase, the arrivals it still needs (reset to `expected` when it completes),
// and its tx-count — bytes announced by expect-tx and not yet delivered by complete-tx, which may run
// in either order, so it can go below zero for a while. A phase completes when both reach zero.
struct MBarrier {
  uint32_t expected = 0, pending = 0;
  int64_t tx = 0;
  uint32_t phase = 0;  // how many phases have completed; the current phase's parity is phase % 2
  uint64_t init_epoch = 0;           // the block's barrier epoch at mbarrier.init ...
  const void* init_thread = nullptr;  // ... and the fiber that ran it: others must wait for a __syncthreads
};

// A bulk copy in flight (cp.async.bulk, or cp.async.bulk.tensor's tile): its bytes, read from global
// memory at issue, in runs by where they land, and the mbarrier its complete-tx signals.
struct BulkCopy {
  uint32_t bar;
  std::vector<SharedRun> runs;
  size_t bytes;  // over all runs: what complete-tx takes off the barrier
};

// Who touched a 16-byte chunk of shared memory since the block's last barrier (see note_shared).
struct SharedUse {
  uint64_t epoch = 0;      // the barrier epoch these fields belong to
  int writer = -1;         // the warp that wrote it in that epoch, -1: none
  uint32_t readers = 0;    // the warps that read it in that epoch, one bit each
};

struct Block {
  const char* kernel = nullptr;  // the launch, for messages
  dim3 grid, block;
  size_t shared_bytes = 0;
  const std::function<void()>* body = nullptr;
  std::vector<Fiber> fibers;
  std::vector<uint64_t> posted;  // one shuffle slot per thread
  Fiber* current = nullptr;
  jmp_buf scheduler;       // where the scheduler continues when a fiber parks or ends
  void* scheduler_fake_stack = nullptr;
  const void* scheduler_bottom = nullptr;  // the host thread's stack, for ASan's switch notes
  size_t scheduler_size = 0;
  ucontext_t start;        // makecontext's template for starting a fiber
  ucontext_t start_from;   // swapcontext's save area (the scheduler returns through `scheduler`)
  std::string fault;
  uint64_t epoch = 0;  // how many times the block's barrier has opened
  std::unordered_map<uint32_t, SharedUse> shared_uses;  // by chunk (offset / 16)
  std::unordered_map<uint32_t, MBarrier> barriers;      // by shared offset, from mbarrier.init
  std::vector<BulkCopy> bulk_copies;                    // cp.async.bulk copies in flight, in issue order
};

// The block the calling host thread runs now (nullptr between launches).
extern thread_local Block* running;

// Parks the running fiber in `state` until the scheduler makes it runnable again.
void park(State state);
// "(x,y,z)", for messages.
std::string describe(const uint3& v);
// An mbarrier whose arrivals and transaction bytes are all in completes its phase.
void complete_phase_if_done(MBarrier& m);
// The shared-memory race detector (shared_memory_races.cpp): the running warp reads or writes the
// 16-byte chunk at `offset`; a race with another warp since the last __syncthreads fails the launch.
void note_shared(uint32_t offset, bool write, const char* what);

}  // namespace brigade::emu
