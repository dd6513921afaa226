// The CUDA emulator's scheduler: a block's threads as fibers on the launching host thread.
//
// One block at a time: make a fiber per thread, then sweep. Each sweep resumes every runnable
// fiber, which runs until it finishes or parks at a barrier (__syncthreads, or the halfway point of
// a warp shuffle). Between sweeps, a warp whose live lanes have all parked in a shuffle is released,
// then a block whose live threads have all parked at __syncthreads. If neither can open, the kernel
// would hang on a GPU (a barrier inside divergent code): the launch fails and says who waits where.
//
// Switches are _setjmp/_longjmp, which stay in user space. A fiber starts on its stack with two
// instructions on x86-64 (elsewhere through makecontext/swapcontext, which also make a system call
// for the signal mask), so a thread that never waits costs well under a microsecond. Still, the
// emulator is a checker for the test suite's small shapes, not a fast path.
#undef _FORTIFY_SOURCE  // its longjmp check refuses jumps between stacks, which is what a fiber is
#include "emulator/simt.h"

#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#if defined(__SANITIZE_ADDRESS__) || BRIGADE_EMULATOR_ALIGNMENT_CHECKS
#include <sanitizer/common_interface_defs.h>
#endif

#include <climits>
#include <cstdio>
#include <memory>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace brigade::emu {

thread_local uint3 thread_index, block_index;
thread_local dim3 block_size, grid_size;

namespace {

constexpr size_t kStackBytes = 64 * 1024;  // kernels keep small arrays in registers; 64 KiB is plenty
constexpr int kWarp = 32;

// AddressSanitizer must be told about every switch between stacks, or it takes the fiber stacks for
// overflows of the host thread's (a -Db_sanitize=address emulator build is a CPU-side memcheck:
// with BRIGADE_TEST_EXACT_ALLOCATIONS=1 every tensor is its own allocation, and a kernel reading
// past one is reported). Without ASan these are empty.
#if defined(__SANITIZE_ADDRESS__)
void leaving_for(void** fake_stack, const void* bottom, size_t size) {
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
}
void arrived(void* fake_stack, const void** from_bottom, size_t* from_size) {
  __sanitizer_finish_switch_fiber(fake_stack, from_bottom, from_size);
}
void fresh_stack(void* bottom, size_t size) { ASAN_UNPOISON_MEMORY_REGION(bottom, size); }
#else
void leaving_for(void**, const void*, size_t) {}
void arrived(void*, const void**, size_t*) {}
void fresh_stack(void*, size_t) {}
#endif

// A stack with a PROT_NONE page below it, so an overflow faults instead of corrupting a neighbour.
class FiberStack {
 public:
  FiberStack() {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    bytes_ = kStackBytes + page;
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    mprotect(p, page, PROT_NONE);
    base_ = static_cast<char*>(p);
    top_ = base_ + page;
  }
  ~FiberStack() { munmap(base_, bytes_); }
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  char* bottom() const { return top_; }

 private:
  char* base_ = nullptr;
  char* top_ = nullptr;
  size_t bytes_ = 0;
};

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

thread_local std::vector<std::unique_ptr<FiberStack>> stacks;  // reused by every block of this thread
thread_local Block* running = nullptr;
thread_local uint64_t blocks_run = 0;  // see block_serial
// Dynamic shared memory: a static of the host thread like every __shared__ array, so its offsets
// from the other shared arrays stay small; the launch's bytes start 16 bytes in (see simt.h).
constexpr size_t kDynamicSharedSlack = 16;
alignas(1024) thread_local unsigned char dynamic_window[227 * 1024 + kDynamicSharedSlack];
thread_local size_t dynamic_bytes = 0;
thread_local const char* shared_base = nullptr;  // see shared_offset

// Back to the scheduler; `parked` fibers will be resumed, the others never.
[[noreturn]] void to_scheduler(Block& b, Fiber& f, bool parked) {
  leaving_for(parked ? &f.fake_stack : nullptr, b.scheduler_bottom, b.scheduler_size);
  _longjmp(b.scheduler, 1);
}

void park(State state) {
  Block& b = *running;
  Fiber* f = b.current;
  f->state = state;
  if (_setjmp(f->resume) == 0) to_scheduler(b, *f, true);
  arrived(f->fake_stack, &b.scheduler_bottom, &b.scheduler_size);
}

[[noreturn]] void fiber_main() {
  Block* block = running;
  arrived(nullptr, &block->scheduler_bottom, &block->scheduler_size);
  block->current->copies.clear();
  block->current->groups = 0;
  (*block->body)();
  block->current->state = State::done;
  to_scheduler(*block, *block->current, false);  // the stack is reused by the next thread
}

// Resumes fiber f (starting it on stack `stack` the first time) until it parks or ends.
void resume(Block& b, Fiber& f, FiberStack& stack) {
  b.current = &f;
  thread_index = f.index;
  if (_setjmp(b.scheduler) != 0) {
    arrived(b.scheduler_fake_stack, nullptr, nullptr);
    return;
  }
  leaving_for(&b.scheduler_fake_stack, stack.bottom(), kStackBytes);
  if (f.started) _longjmp(f.resume, 1);
  f.started = true;
  fresh_stack(stack.bottom(), kStackBytes);  // a thread that faulted may have left poisoned frames
#if defined(__x86_64__)
  // Point the stack pointer at the top of the fiber's stack (16-byte aligned, as the ABI wants at a
  // call) and call fiber_main there. It never returns: it longjmps back to `scheduler`.
  char* top = stack.bottom() + kStackBytes;
  asm volatile("mov %0, %%rsp\n\tcall *%1" : : "r"(top), "r"(&fiber_main) : "memory");
  __builtin_unreachable();
#else
  b.start.uc_stack.ss_sp = stack.bottom();
  b.start.uc_stack.ss_size = kStackBytes;
  b.start.uc_link = nullptr;
  makecontext(&b.start, fiber_main, 0);
  swapcontext(&b.start_from, &b.start);
#endif
}

std::string describe(const uint3& v) {
  std::ostringstream s;
  s << "(" << v.x << "," << v.y << "," << v.z << ")";
  return s.str();
}

// The threads parked in `state`, e.g. "(0,0,0) (1,0,0) ... 64 threads".
std::string who(const Block& b, State state) {
  std::string out;
  int count = 0;
  for (const Fiber& f : b.fibers)
    if (f.state == state && count++ < 4) out += describe(f.index) + " ";
  return out + "(" + std::to_string(count) + " threads)";
}

bool release_warps(Block& b) {
  bool released = false;
  const int warps = int((b.fibers.size() + kWarp - 1) / kWarp);
  for (int w = 0; w < warps; ++w) {
    bool waiting = false, all = true;
    for (size_t t = size_t(w) * kWarp; t < std::min(b.fibers.size(), size_t(w + 1) * kWarp); ++t) {
      const State s = b.fibers[t].state;
      if (s == State::at_warp_barrier) waiting = true;
      else if (s != State::done) all = false;
    }
    if (!waiting || !all) continue;
    for (size_t t = size_t(w) * kWarp; t < std::min(b.fibers.size(), size_t(w + 1) * kWarp); ++t)
      if (b.fibers[t].state == State::at_warp_barrier) b.fibers[t].state = State::runnable;
    released = true;
  }
  return released;
}

// Threads waiting for an mbarrier phase that has completed (its parity is no longer the current
// one) go on.
bool release_mbarrier_waiters(Block& b) {
  bool released = false;
  for (Fiber& f : b.fibers) {
    if (f.state != State::at_mbarrier) continue;
    const MBarrier& m = b.barriers.at(f.wait_bar);
    if (m.phase % 2 != f.wait_parity) {
      f.state = State::runnable;
      released = true;
    }
  }
  return released;
}

void complete_phase_if_done(MBarrier& m) {
  if (m.pending != 0 || m.tx != 0) return;
  ++m.phase;
  m.pending = m.expected;
}

// One bulk copy in flight lands and signals its barrier: called only when no thread can run, so a
// copy arrives at the latest moment a GPU could deliver it. The ISA promises no order among copies,
// so the newest lands first, and the threads it releases run before the next lands: a kernel that
// lets a later copy complete an earlier phase reads that phase's poison.
bool land_bulk_copy(Block& b) {
  if (b.bulk_copies.empty()) return false;
  const BulkCopy c = std::move(b.bulk_copies.back());
  b.bulk_copies.pop_back();
  for (const SharedRun& run : c.runs) std::memcpy(shared_pointer(run.dst), run.bytes.data(), run.bytes.size());
  MBarrier& m = b.barriers.at(c.bar);
  m.tx -= int64_t(c.bytes);
  complete_phase_if_done(m);
  return true;
}

// Threads that completed an mbarrier phase go on, once the threads it released have had their turn.
bool wake_yielded(Block& b) {
  bool woke = false;
  for (Fiber& f : b.fibers)
    if (f.state == State::yielded) f.state = State::runnable, woke = true;
  return woke;
}

bool release_block(Block& b) {
  for (const Fiber& f : b.fibers)
    if (f.state != State::done && f.state != State::at_block_barrier) return false;
  for (Fiber& f : b.fibers)
    if (f.state == State::at_block_barrier) f.state = State::runnable;
  ++b.epoch;  // everything before the barrier is ordered before everything after it
  return true;
}

// Runs one block to the end; returns "" or the fault.
std::string run_block(Block& b, uint3 block, dim3 block_dim) {
  const size_t threads = size_t(block_dim.x) * block_dim.y * block_dim.z;
  while (stacks.size() < threads) stacks.push_back(std::make_unique<FiberStack>());
  b.fibers.assign(threads, Fiber{});
  b.posted.assign(threads, 0);
  b.fault.clear();
  b.epoch = 0;
  b.shared_uses.clear();
  b.barriers.clear();
  b.bulk_copies.clear();
  ++blocks_run;
  std::memset(dynamic_window + kDynamicSharedSlack, 0xff, dynamic_bytes);
  for (size_t t = 0; t < threads; ++t) {
    Fiber& f = b.fibers[t];
    f.index = make_uint3(unsigned(t % block_dim.x), unsigned(t / block_dim.x % block_dim.y),
                         unsigned(t / (size_t(block_dim.x) * block_dim.y)));
    f.warp = int(t / kWarp);
    f.lane = int(t % kWarp);
  }
  block_index = block;
  for (;;) {
    bool live = false;
    for (size_t t = 0; t < threads; ++t) {
      Fiber& f = b.fibers[t];
      if (f.state == State::runnable) {
        resume(b, f, *stacks[t]);
        if (!b.fault.empty()) return b.fault;
      }
      live = live || f.state != State::done;
    }
    if (!live) {
      if (b.bulk_copies.empty()) return "";
      return "block " + describe(block) + " ended with " + std::to_string(b.bulk_copies.size()) +
             " cp.async.bulk copies in flight (into shared memory that no longer exists): wait on their mbarrier";
    }
    if (release_warps(b) || release_block(b) || release_mbarrier_waiters(b)) continue;
    if (wake_yielded(b)) continue;
    if (land_bulk_copy(b)) continue;
    return "threads of block " + describe(block) + " wait at barriers that cannot open (a barrier in divergent "
           "code would hang a GPU): at __syncthreads " + who(b, State::at_block_barrier) +
           "; in a warp shuffle " + who(b, State::at_warp_barrier) + "; for an mbarrier phase " +
           who(b, State::at_mbarrier);
  }
}

}  // namespace

void sync_block() { park(State::at_block_barrier); }

void gather_in_warp(uint64_t value, uint64_t (&all)[32]) {
  Block& b = *running;
  Fiber& self = *b.current;
  const size_t first = size_t(self.warp) * kWarp;
  b.posted[first + size_t(self.lane)] = value;
  park(State::at_warp_barrier);
  for (int lane = 0; lane < kWarp; ++lane) {
    const size_t t = first + size_t(lane);
    if (t >= b.fibers.size() || b.fibers[t].state == State::done)
      kernel_fault("thread " + describe(self.index) + " runs a warp-collective instruction without lane " +
                   std::to_string(lane) + " (it has exited or does not exist)");
    all[lane] = b.posted[t];
  }
  park(State::at_warp_barrier);
}

uint32_t shared_offset(const void* p) {
  const char* c = static_cast<const char*>(p);
  // The window starts 1024-aligned, as a GPU's does, so an offset keeps its address's alignment
  // (what the 8- and 16-byte alignment rules of mbarrier and the async copies are checked on).
  if (!shared_base) shared_base = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(c) & ~uintptr_t(1023));
  const int64_t offset = c - shared_base;
  if (offset < INT32_MIN || offset > INT32_MAX) kernel_fault("a shared-memory address outside the shared window");
  return uint32_t(int32_t(offset));
}

void* shared_pointer(uint32_t offset) { return const_cast<char*>(shared_base) + int32_t(offset); }

void* dynamic_shared_memory() {
  if (dynamic_bytes == 0) kernel_fault("extern __shared__ memory used by a kernel launched with none (shared_bytes 0)");
  return dynamic_window + kDynamicSharedSlack;
}

// The race detector for shared memory, at 16-byte granularity, for the accesses that go through the
// emulated instructions (ldmatrix reads; cp.async and st.shared.v4 writes — every shared-memory
// access of the tensor-core kernels). Two accesses by different warps, at least one a write, with no
// __syncthreads between them are a race on a GPU: nothing orders them. The emulator's fibers run
// warps in near lockstep, so such a race rarely changes a result here; this finds it whatever the
// interleaving, as compute-sanitizer's racecheck does on a GPU. Plain C++ accesses to __shared__
// arrays are not seen.
void note_shared(uint32_t offset, bool write, const char* what) {
  Block& b = *running;
  const int warp = b.current->warp;
  SharedUse& use = b.shared_uses[offset / 16];
  if (use.epoch != b.epoch) use = SharedUse{b.epoch, -1, 0};
  auto race = [&](int other, const char* earlier) {
    kernel_fault(std::string(what) + " by warp " + std::to_string(warp) + " touches shared bytes [" +
                 std::to_string(offset / 16 * 16) + ", +16) that warp " + std::to_string(other) + " " + earlier +
                 " since the last __syncthreads: a race on a GPU (a barrier is missing between the two)");
  };
  if (use.writer >= 0 && use.writer != warp) race(use.writer, "wrote");
  if (write) {
    const uint32_t others = use.readers & ~(1u << warp);
    if (others) race(__builtin_ctz(others), "read");
    use.writer = warp;
  } else {
    use.readers |= 1u << warp;
  }
}

void store_shared_16(uint32_t dst, const void* v) {
  note_shared(dst, true, "st.shared.v4");
  std::memcpy(shared_pointer(dst), v, 16);
}

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

uint64_t block_serial() { return blocks_run; }

// ldmatrix .x4: lanes 8j..8j+7 give the row addresses of 8x8 matrix j, and lane l receives, in r[j],
// the two 16-bit elements (l/4, 2(l%4)) and (l/4, 2(l%4)+1) of matrix j; with .trans, of its
// transpose: (2(l%4), l/4) and (2(l%4)+1, l/4).
void ldmatrix_x4(uint32_t (&r)[4], uint32_t address, bool transpose) {
  if (address % 16 != 0) kernel_fault("ldmatrix with a row address that is not 16-byte aligned");
  uint64_t rows[32];
  gather_in_warp(address, rows);
  note_shared(address, false, "ldmatrix");  // each lane's own 16-byte row
  const int l = running->current->lane, group = l / 4, pair = l % 4;
  auto element = [&](int matrix, int row, int col) {
    uint16_t v;
    std::memcpy(&v, static_cast<char*>(shared_pointer(uint32_t(rows[8 * matrix + row]))) + 2 * col, 2);
    return uint32_t(v);
  };
  for (int j = 0; j < 4; ++j) {
    r[j] = transpose ? element(j, 2 * pair, group) | element(j, 2 * pair + 1, group) << 16
                     : element(j, group, 2 * pair) | element(j, group, 2 * pair + 1) << 16;
  }
}

// mma.m16n8k16.row.col with f32 accumulators. Lane l (group g = l/4, t = l%4) holds
//   A (16x16): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   B (16x8):  b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]
//   C (16x8):  c0, c1 = C[g][2t..2t+1], c2, c3 = C[g+8][2t..2t+1]
// (the low half of each register is the first element). Products are exact in f32 and summed in
// f32, in k order; the hardware's order is unspecified, so last bits may differ from a GPU's.
void mma_m16n8k16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool bf16_inputs) {
  uint64_t a01[32], a23[32], b01[32];
  gather_in_warp(uint64_t(a[0]) | uint64_t(a[1]) << 32, a01);
  gather_in_warp(uint64_t(a[2]) | uint64_t(a[3]) << 32, a23);
  gather_in_warp(uint64_t(b[0]) | uint64_t(b[1]) << 32, b01);
  auto value = [&](uint32_t bits16) { return float_from_16(bits16, bf16_inputs); };
  auto half_of = [](uint64_t regs, int reg, int half) { return uint32_t(regs >> (32 * reg + 16 * half)) & 0xffffu; };
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * t + h] = value(half_of(a01[lane], 0, h));
      A[g + 8][2 * t + h] = value(half_of(a01[lane], 1, h));
      A[g][2 * t + 8 + h] = value(half_of(a23[lane], 0, h));
      A[g + 8][2 * t + 8 + h] = value(half_of(a23[lane], 1, h));
      B[2 * t + h][g] = value(half_of(b01[lane], 0, h));
      B[2 * t + 8 + h][g] = value(half_of(b01[lane], 1, h));
    }
  }
  const int l = running->current->lane, g = l / 4, t = l % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i % 2);
    float sum = acc[i];
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    acc[i] = sum;
  }
}

uint64_t exchange_in_warp(uint64_t value, int source_lane) {
  Block& b = *running;
  Fiber& self = *b.current;
  const size_t first = size_t(self.warp) * kWarp;
  b.posted[first + size_t(self.lane)] = value;
  park(State::at_warp_barrier);  // every live lane has posted
  const size_t source = first + size_t(source_lane);
  if (source_lane < 0 || source_lane >= kWarp || source >= b.fibers.size())
    kernel_fault("thread " + describe(self.index) + " shuffles from lane " + std::to_string(source_lane) +
                 ", which this block does not have");
  if (b.fibers[source].state == State::done)
    kernel_fault("thread " + describe(self.index) + " shuffles from lane " + std::to_string(source_lane) +
                 ", which has already exited (undefined on a GPU)");
  const uint64_t out = b.posted[source];
  park(State::at_warp_barrier);  // every lane has read before anyone posts again
  return out;
}

void kernel_fault(const std::string& what) {
  Block& b = *running;
  b.fault = what;
  b.current->state = State::done;
  to_scheduler(b, *b.current, false);  // the block stops here; this fiber is never resumed
}

namespace {
// "kernel<<<(gx,gy,gz), (bx,by,bz), smem>>>", for messages only.
std::string describe_launch(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes) {
  std::ostringstream s;
  s << kernel << "<<<(" << grid.x << "," << grid.y << "," << grid.z << "), (" << block.x << "," << block.y << ","
    << block.z << "), " << shared_bytes << ">>>";
  return s.str();
}

#if BRIGADE_EMULATOR_ALIGNMENT_CHECKS
// Emulator builds compile with -fsanitize=alignment -fno-sanitize-recover=alignment: a load or store
// through a misaligned pointer (a float4 read at an address that is not a multiple of 16) stops the
// process, as it stops the GPU's context with cudaErrorMisalignedAddress. x86 would just read it,
// so without this the emulator could not see the bug. The sanitizer's report names the .cu line;
// this adds the launch, block and thread that were running, as the process dies. (Any sanitizer's
// death calls it: in an ASan build, an out-of-bounds access in a kernel is reported the same way.)
void report_running_thread() {
  const Block* b = running;
  if (b == nullptr || b->current == nullptr) return;
  const std::string where = describe_launch(b->kernel, b->grid, b->block, b->shared_bytes) + ", block " +
                            describe(block_index) + ", thread " + describe(b->current->index);
  std::fprintf(stderr,
               "brigade GPU emulator: the sanitizer error above happened in %s. A GPU ends the process's CUDA "
               "context there too: cudaErrorMisalignedAddress for a misaligned access, cudaErrorIllegalAddress "
               "for one out of bounds.\n",
               where.c_str());
}
[[maybe_unused]] const bool report_registered = (__sanitizer_set_death_callback(&report_running_thread), true);
#endif

}  // namespace

std::string check_launch_config(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  // The limits of every GPU since Volta; a launch beyond them fails on the device too.
  const char* bad = nullptr;
  if (threads == 0 || uint64_t(grid.x) * grid.y * grid.z == 0) bad = "an empty grid or block";
  else if (threads > 1024) bad = "more than 1024 threads in a block";
  else if (block.z > 64) bad = "blockDim.z above 64";
  else if (grid.y > 65535 || grid.z > 65535) bad = "gridDim.y or gridDim.z above 65535";
  else if (grid.x > 2147483647u) bad = "gridDim.x above 2^31 - 1";
  else if (shared_bytes > 227 * 1024) bad = "more than 227 KiB of dynamic shared memory";
  if (!bad) return "";
  return describe_launch(kernel, grid, block, shared_bytes) + ": invalid launch configuration: " + bad;
}

namespace {
// Runs body() once for every thread of the grid on this host thread; returns "" or the fault.
std::string run_grid(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes, const std::function<void()>& body) {
  Block b;
  b.kernel = kernel;
  b.grid = grid;
  b.block = block;
  b.shared_bytes = shared_bytes;
  b.body = &body;
  getcontext(&b.start);
  Block* outer = running;
  running = &b;
  shared_base = nullptr;
  dynamic_bytes = shared_bytes;
  grid_size = grid;
  block_size = block;
  std::string fault;
  for (unsigned z = 0; z < grid.z && fault.empty(); ++z)
    for (unsigned y = 0; y < grid.y && fault.empty(); ++y)
      for (unsigned x = 0; x < grid.x && fault.empty(); ++x) fault = run_block(b, make_uint3(x, y, z), block);
  running = outer;
  return fault;
}
}  // namespace

void launch_grid(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                 std::vector<Access> pointers, std::function<void()> body) {
  load_on_first_launch(kernel, stream);
  enqueue(stream, describe_launch(kernel, grid, block, shared_bytes), std::move(pointers),
          [kernel, grid, block, shared_bytes, body = std::move(body)] {
            return run_grid(kernel, grid, block, shared_bytes, body);
          });
}

}  // namespace brigade::emu
