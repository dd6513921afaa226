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
//
// The models of PTX instructions act on the running thread through simt_internal.h: cp.async,
// mbarrier and the bulk copies in async_copies.cpp, ldmatrix and mma.sync in mma.cpp, the
// shared-memory race detector in shared_memory_races.cpp, the TMA in tensor_maps.cpp, wgmma in
// wgmma.cpp.
#undef _FORTIFY_SOURCE  // its longjmp check refuses jumps between stacks, which is what a fiber is
#include "emulator/simt_internal.h"

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

thread_local Block* running = nullptr;

namespace {

constexpr size_t kStackBytes = 64 * 1024;  // kernels keep small arrays in registers; 64 KiB is plenty

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

thread_local std::vector<std::unique_ptr<FiberStack>> stacks;  // reused by every block of this thread
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

void park(State state) {
  Block& b = *running;
  Fiber* f = b.current;
  f->state = state;
  if (_setjmp(f->resume) == 0) to_scheduler(b, *f, true);
  arrived(f->fake_stack, &b.scheduler_bottom, &b.scheduler_size);
}

std::string describe(const uint3& v) {
  std::ostringstream s;
  s << "(" << v.x << "," << v.y << "," << v.z << ")";
  return s.str();
}

void complete_phase_if_done(MBarrier& m) {
  if (m.pending != 0 || m.tx != 0) return;
  ++m.phase;
  m.pending = m.expected;
}

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

uint64_t block_serial() { return blocks_run; }

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
