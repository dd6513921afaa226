// The device side of the CUDA emulator: what a kernel sees when g++ compiles it for the CPU.
//
// A build configured with -Dgpu_emulator=true compiles every .cu file with g++ instead of nvcc
// (scripts/cuda_emulate.py turns `kernel<<<grid, block, smem, stream>>>(args)` into
// `Launch(grid, block, smem, stream).run("kernel", kernel, args)`), and links the fake runtime of
// emulator/runtime.cpp instead of libcudart. The kernels are the very code a GPU runs; only
// the machine under them changes:
//
//   - each CUDA thread of a block is a fiber (its own stack, ucontext) on the launching host thread.
//     Blocks run one after another, so `__shared__` arrays can be plain statics of the host thread;
//   - __syncthreads() parks the fiber until every live thread of its block has arrived; a warp
//     shuffle parks it until every live lane of its warp has posted its value. When nothing can run
//     and no barrier can open, the kernel has a divergent barrier: the launch fails naming the
//     kernel, block and threads (on a GPU that hangs or reads garbage);
//   - a shuffle that reads a lane which has exited or does not exist fails the launch the same way;
//   - pointer arguments must point into device memory (cudaMalloc) or pinned host memory, and launch
//     configurations must respect the GPU's limits (1024 threads a block, 65535 blocks in y and z).
//
// What it cannot show: timing, the memory model between threads that do not synchronise, and
// floating-point last bits where CUDA's libdevice and glibc's libm differ (expf, tanhf, ...).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "emulator/runtime.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace brigade::emu {

// The position of the fiber that runs now; the scheduler sets it before every switch.
extern thread_local uint3 thread_index, block_index;
extern thread_local dim3 block_size, grid_size;

// Parks the running fiber at its block's barrier (__syncthreads).
void sync_block();
// Posts 8 bytes for this lane, waits for the warp, and returns what `source_lane` posted.
uint64_t exchange_in_warp(uint64_t value, int source_lane);
// Ends the running kernel with an error (an emulator-detected bug in the kernel).
[[noreturn]] void kernel_fault(const std::string& what);

// "" when the grid and block are within the GPU's limits, else why not.
std::string check_launch_config(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes);
// Queues a valid grid on `stream` (emulator/runtime.h's enqueue): when its turn comes,
// body() runs once for every thread. `pointers` are the kernel's pointer arguments, for the race
// detector (written unless they point to const).
void launch_grid(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                 std::vector<Access> pointers, std::function<void()> body);
// Checks kernel pointer argument `index`: device memory of the current device (up to one past an
// allocation's end) or pinned host memory; "" when it is fine.
std::string check_kernel_pointer(const char* kernel, int index, const void* pointer);
// Checks that `stream` belongs to the current device, as a launch on it requires; "" when it does.
std::string check_launch_stream(const char* kernel, cudaStream_t stream);
// Records a failed launch for cudaGetLastError and the synchronising calls.
void record_launch_error(cudaError_t code, const std::string& what);

// What `kernel<<<grid, block, shared_bytes, stream>>>(args...)` becomes.
class Launch {
 public:
  Launch(dim3 grid, dim3 block, size_t shared_bytes = 0, cudaStream_t stream = nullptr)
      : grid_(grid), block_(block), shared_bytes_(shared_bytes), stream_(stream) {}

  // `kernel` is a lambda that calls the kernel (`[](auto... a) { name(a...); }`), so template
  // arguments are deduced from the call as nvcc deduces them.
  template <class Kernel, class... Args>
  void run(const char* name, Kernel kernel, Args&&... args) const {
    // Kernel parameters are copies, made once at the launch, as the CUDA runtime makes them.
    std::tuple<std::decay_t<Args>...> params(std::forward<Args>(args)...);
    std::string error = check_launch_config(name, grid_, block_, shared_bytes_);
    if (!error.empty()) return record_launch_error(cudaErrorInvalidConfiguration, error);
    error = check_launch_stream(name, stream_);
    if (error.empty()) error = check_pointers(name, params, std::index_sequence_for<Args...>{});
    if (!error.empty()) return record_launch_error(cudaErrorLaunchFailure, error);
    launch_grid(name, grid_, block_, shared_bytes_, stream_, pointers(params, std::index_sequence_for<Args...>{}),
                [kernel, params] {
                  auto copy = params;  // each thread gets its own parameters and may change them
                  std::apply(kernel, std::move(copy));
                });
  }

 private:
  template <class Tuple, size_t... I>
  static std::string check_pointers(const char* name, const Tuple& params, std::index_sequence<I...>) {
    std::string error;
    auto check = [&](int index, const auto& value) {
      if constexpr (std::is_pointer_v<std::decay_t<decltype(value)>>) {
        if (error.empty()) error = check_kernel_pointer(name, index, address_of(value));
      }
    };
    (check(int(I), std::get<I>(params)), ...);
    return error;
  }

  // The address a pointer argument holds (volatile ones included: a kernel may poll host memory).
  template <class T>
  static const void* address_of(T* p) {
    return const_cast<const void*>(static_cast<const volatile void*>(p));
  }

  // The pointer arguments, and whether the kernel may write through each (not a pointer to const).
  template <class Tuple, size_t... I>
  static std::vector<Access> pointers(const Tuple& params, std::index_sequence<I...>) {
    std::vector<Access> out;
    auto add = [&](const auto& value) {
      using T = std::decay_t<decltype(value)>;
      if constexpr (std::is_pointer_v<T>) {
        if (value) out.push_back({address_of(value), !std::is_const_v<std::remove_pointer_t<T>>});
      } else if constexpr (std::is_class_v<T> && std::is_trivially_copyable_v<T> && sizeof(T) >= sizeof(void*)) {
        // Pointers inside a structure passed by value (an array of input pointers, a table of
        // tensors): every aligned word is a candidate, and the race detector keeps those that hold
        // the address of a live allocation. Their constness is lost, so they count as reads.
        for (size_t at = 0; at + sizeof(void*) <= sizeof(T); at += sizeof(void*)) {
          const void* word = nullptr;
          std::memcpy(&word, reinterpret_cast<const char*>(&value) + at, sizeof(void*));
          if (word) out.push_back({word, false, true});
        }
      }
    };
    (add(std::get<I>(params)), ...);
    return out;
  }

  dim3 grid_, block_;
  size_t shared_bytes_;
  cudaStream_t stream_;
};

// Every lane's 8 bytes, once the whole warp has posted: the basis of warp-collective instructions.
void gather_in_warp(uint64_t value, uint64_t (&all)[32]);

// Shared-memory addresses. PTX names shared memory by 32-bit offsets into the block's window; here
// an offset is taken from the first shared address the launch converts, rounded down to 1024 bytes
// (every __shared__ array is a static of this host thread, so the others lie a few KiB away).
uint32_t shared_offset(const void* p);
void* shared_pointer(uint32_t offset);
// The block's dynamic shared memory (`extern __shared__`, the launch's shared_bytes): all bits set at
// the start of every block (shared memory starts undefined), and 16 bytes past a 1024-byte boundary —
// the 16-byte alignment CUDA guarantees and no more, so a kernel that needs more aligns it itself.
void* dynamic_shared_memory();

// The PTX instructions of the tensor-core GEMM (kernels/cuda/gemm_tensor_core.cu), written from
// their definitions in the PTX ISA: warp-collective, so each one gathers the warp's operands first.
void ldmatrix_x4(uint32_t (&r)[4], uint32_t address, bool transpose);  // ldmatrix.sync.aligned.m8n8.x4[.trans].b16
void mma_m16n8k16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool bf16_inputs);
// cp.async.cg.shared.global (bytes < 16: zero-filled), cp.async.commit_group and cp.async.wait_group:
// copies land at the latest moment the PTX ISA allows, the destination poisoned until then
// (async_copies.cpp).
void cp_async_16(uint32_t dst, const void* src, int bytes);
void cp_async_commit();
void cp_async_wait(int pending);
void store_shared_16(uint32_t dst, const void* v);  // st.shared.v4
// mbarrier.init / mbarrier.arrive.expect_tx (tx 0: a plain arrive) / mbarrier.try_wait.parity on a
// shared::cta barrier, and cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes: the
// copy lands, and signals its barrier, at the latest moment allowed — when no thread of the block can
// go on without it — with its destination poisoned until then (async_copies.cpp). A wait that can
// never be satisfied fails the launch like a barrier that cannot open; a block may not end with a
// copy in flight.
void mbarrier_init(uint32_t bar, uint32_t count);
uint64_t mbarrier_arrive_expect_tx(uint32_t bar, uint32_t tx_bytes);
bool mbarrier_try_wait_parity(uint32_t bar, uint32_t parity);
void cp_async_bulk_to_shared(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar);
// cp.async.bulk.tensor.{rank}d...tile.mbarrier::complete_tx::bytes: the box of the tensor map `map`
// (a CUtensorMap made by the emulator's cuTensorMapEncodeTiled) at `coords`, swizzled into shared
// memory, with the same late landing and poison (emulator/tensor_maps.cpp).
void cp_async_bulk_tensor_to_shared(uint32_t dst, const void* map, const int32_t* coords, int rank, uint32_t bar);
// wgmma.fence / wgmma.mma_async.m64nNk16.f32.{bf16,f16} with both operands in shared memory (K-major,
// 128-byte swizzle) / wgmma.commit_group / wgmma.wait_group (emulator/wgmma.cpp): the
// accumulators are undefined (NaN) from the mma until the wait that retires its group, and are
// computed there, reading shared memory at that moment.
void wgmma_fence();
void wgmma_mma_async(float* d, int n, uint64_t desc_a, uint64_t desc_b, bool accumulate, bool bf16_inputs);
void wgmma_commit_group();
void wgmma_wait_group(int pending);
// Shared-memory accesses by different warps with no barrier between them, one of them a write, fail
// the launch (shared_memory_races.cpp: note_shared); ldmatrix, cp.async and store_shared_16 report
// theirs.

// ---- for the emulator's other instruction models (tensor_maps.cpp, wgmma.cpp) ----
// Bytes that land at one shared offset.
struct SharedRun {
  uint32_t dst;
  std::vector<unsigned char> bytes;
};
// What every bulk copy does once its source is read: checks the mbarrier and that no run covers one,
// poisons the runs' bytes, and queues them to land — all at once, at the latest moment — followed
// by complete-tx(total bytes) on `bar`. `instruction` names it in faults.
void queue_bulk_copy(std::vector<SharedRun> runs, uint32_t bar, const char* instruction);
// The running thread's linear index in its block.
inline int thread_in_block() {
  return int(thread_index.x + block_size.x * (thread_index.y + block_size.y * thread_index.z));
}
// The 128-byte swizzle of the TMA (CU_TENSOR_MAP_SWIZZLE_128B) and of wgmma's descriptors (mode 1):
// the 16-byte chunk at bits 4-6 of a shared address XOR bits 7-9 (chunk c of 128-byte row r moves to
// c ^ (r % 8)), on the address itself, so the pattern repeats every 1024 bytes.
inline uint32_t swizzle_128(uint32_t offset) { return offset ^ (((offset >> 7) & 7u) << 4); }
// A bf16 (the top half of an f32) or f16 bit pattern as a float: the tensor-core operands' values.
inline float float_from_16(uint32_t bits16, bool bf16) {
  if (bf16) {
    const uint32_t u = bits16 << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  return __half2float(__ushort_as_half(uint16_t(bits16)));
}
// Changes with every block the emulator starts: per-thread state kept outside the scheduler (a
// thread's wgmma in flight) is stale when it does.
uint64_t block_serial();

template <class T>
T shuffle(T value, int source_lane) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = exchange_in_warp(bits, source_lane);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

inline int lane() { return thread_in_block() % 32; }

inline void check_full_mask(unsigned mask, const char* intrinsic) {
  if (mask != 0xffffffffu) kernel_fault(std::string(intrinsic) + " with a partial mask: the emulator models full warps only");
}

}  // namespace brigade::emu

// ---- the built-in variables ----------------------------------------------------------------------
#define threadIdx (::brigade::emu::thread_index)
#define blockIdx (::brigade::emu::block_index)
#define blockDim (::brigade::emu::block_size)
#define gridDim (::brigade::emu::grid_size)
constexpr int warpSize = 32;

// __shared__ memory belongs to the block; blocks of one launch run one after another on one host
// thread, so a static of that host thread is exactly one block's shared memory.
#undef __shared__
#define __shared__ static thread_local
#undef __launch_bounds__
#define __launch_bounds__(...)

// ---- synchronisation and warp intrinsics ------------------------------------------------------------
inline void __syncthreads() { ::brigade::emu::sync_block(); }
// Ends the kernel with an error, as the trap instruction does (the launch fails).
[[noreturn]] inline void __trap() { ::brigade::emu::kernel_fault("__trap(): the kernel stopped itself"); }

template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  ::brigade::emu::check_full_mask(mask, "__shfl_xor_sync");
  const int lane = ::brigade::emu::lane();
  int source = lane ^ lane_mask;
  if (source > (lane | (width - 1))) source = lane;  // past the end of the lane's segment: own value
  return ::brigade::emu::shuffle(value, source);
}
template <class T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32) {
  ::brigade::emu::check_full_mask(mask, "__shfl_down_sync");
  const int lane = ::brigade::emu::lane();
  const int source = (lane % width) + int(delta) < width ? lane + int(delta) : lane;
  return ::brigade::emu::shuffle(value, source);
}
template <class T>
T __shfl_sync(unsigned mask, T value, int source_lane, int width = 32) {
  ::brigade::emu::check_full_mask(mask, "__shfl_sync");
  const int lane = ::brigade::emu::lane();
  return ::brigade::emu::shuffle(value, (lane & ~(width - 1)) + (source_lane & (width - 1)));
}

// Fibers of one host thread never run at the same time, so a read-modify-write is atomic.
template <class T>
T atomicAdd(T* address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}
template <class T>
T atomicMin(T* address, T value) {
  const T old = *address;
  if (value < old) *address = value;
  return old;
}

// ---- math device code calls unqualified --------------------------------------------------------------
// CUDA's min and max take mixed integer types and return their common type.
template <class A, class B>
std::common_type_t<A, B> min(A a, B b) {
  return b < a ? std::common_type_t<A, B>(b) : std::common_type_t<A, B>(a);
}
template <class A, class B>
std::common_type_t<A, B> max(A a, B b) {
  return a < b ? std::common_type_t<A, B>(b) : std::common_type_t<A, B>(a);
}
using std::isinf;
using std::isnan;

inline size_t __cvta_generic_to_shared(const void* p) { return ::brigade::emu::shared_offset(p); }

// ---- bit casts and rounding intrinsics -----------------------------------------------------------
inline float __uint_as_float(unsigned v) { float f; std::memcpy(&f, &v, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned v; std::memcpy(&v, &f, 4); return v; }
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline int __float_as_int(float f) { int v; std::memcpy(&v, &f, 4); return v; }
// IEEE products rounded to nearest. (nvcc contracts a*b+c into an FMA where it can; g++ for baseline
// x86-64 has no FMA instruction to contract into, so emulated results may differ there in last bits.)
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }  // IEEE sums, never contracted with a product
inline double __dadd_rn(double a, double b) { return a + b; }
inline float __double2float_rn(double v) { return float(v); }
inline float __expf(float v) { return std::exp(v); }
