// The hand-written tensor-core GEMM: C = A @ B for bf16 or f16 inputs, accumulated in f32 by
// mma.sync.m16n8k16 instructions; C is written as f32 or rounded once to the input type.
//
// The pieces, from the instruction up:
//   - mma.sync.m16n8k16: one warp multiplies a 16 x 16 piece of A by a 16 x 8 piece of B and adds
//     into a 16 x 8 f32 accumulator. Each operand is spread over the warp's registers in a fixed
//     pattern ("fragments"): lane l holds, for A, rows l/4 and l/4 + 8, columns 2(l%4) + {0, 1, 8, 9}.
//   - ldmatrix.x4: the warp loads four 8 x 8 blocks of 16-bit values from shared memory, each lane
//     supplying one 16-byte row address, and receives them already in fragment order. With .trans it
//     loads blocks stored the other way round — how a transposed operand costs nothing.
//   - Swizzled shared memory: ldmatrix reads 8 rows of 16 bytes at once. Stored plainly, rows of a
//     tile are 64 or 256 bytes apart and those 8 reads would hit the same banks. XOR-ing the 16-byte
//     chunk index with a few bits of the row index (swizzle_offset) spreads them over all banks.
//   - cp.async: global -> shared copies that bypass registers and run in the background; a
//     3-stage ring of K slices keeps two slices in flight while the warps multiply the third.
//   - Block and warp tiles: a block of 8 warps owns a 128 x 128 tile of C; warp (wm, wn) owns a
//     64 x 32 piece of it, i.e. 4 x 4 mma tiles, 64 f32 accumulators per lane.
//
// B is handled as Bᵀ ([n, k]), so A and B load through the same code: an operand is a [rows, K]
// matrix stored either k-contiguous (A row-major, or B column-major) or rows-contiguous (A
// transposed, or B row-major, the usual case). The layout is a template parameter, since it decides
// ldmatrix vs ldmatrix.trans in the innermost loop.
//
// Edges: only whole 16-byte chunks inside the matrix go through cp.async; a chunk that crosses the
// edge is read element by element and stored to shared memory with its missing part zeroed. (PTX's
// cp.async can zero-fill by itself, given a source size below 16, but compute-sanitizer's memcheck
// counts all 16 bytes as read: on an H200 it reported a 16-byte read of a 2-byte tensor. The
// emulator checks cp.async's whole window the same way.) Whole chunks need 16-byte aligned rows:
// kernels/cuda/matmul.cpp copies operands that are not (tensor_core_can_read) into padded ones first.
#include <climits>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/epilogue.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/mma.cuh"

namespace brigade::cuda {
namespace {

constexpr int kTile = 128;   // rows of A and of Bᵀ per block
constexpr int kStepK = 32;   // K per pipeline stage
constexpr int kStages = 3;
constexpr int kBlockThreads = 256;  // 8 warps: 2 along m x 4 along n
constexpr int kWarpRows = 64, kWarpCols = 32;
constexpr int kMmaRows = kWarpRows / 16;  // mma tiles per warp along m (16 rows each)
constexpr int kMmaCols = kWarpCols / 8;   // along n (8 columns each)
constexpr int kSliceBytes = kTile * kStepK * 2;  // one operand's [128, 32] slice of 16-bit values

// ---- shared-memory layout of one operand slice ----
// A slice is 128 rows x 32 k of 16-bit values. K-contiguous operands store it as 128 lines of 4
// 16-byte chunks (8 k each); rows-contiguous ones as 32 lines (one per k) of 16 chunks (8 rows each).
// The index arithmetic below is __host__ too, so it can be checked on a machine without a GPU.
template <bool KContiguous>
struct SliceLayout {
  static constexpr int kChunks = KContiguous ? kStepK / 8 : kTile / 8;

  // Byte offset of chunk `chunk` of line `line`, swizzled. ldmatrix reads one chunk from each of 8
  // consecutive lines (line % 8 == 0..7) at the same logical chunk; the XOR makes those 8 land in 8
  // different 16-byte bank groups of a 128-byte row:
  //   16 chunks per line (256 B): chunk ^ (line % 8).
  //   4 chunks per line (64 B, two lines per 128 B): line parity picks the half, and
  //   chunk ^ ((line / 2) % 4) separates the four lines of equal parity.
  static __host__ __device__ __forceinline__ uint32_t offset(int line, int chunk) {
    const int swizzled = kChunks == 16 ? chunk ^ (line & 7) : chunk ^ ((line >> 1) & 3);
    return uint32_t((line * kChunks + swizzled) * 16);
  }

  // Chunk `id` (0..511) of a slice whose first row is row0 and first k is k0: where it goes in shared
  // memory, and where it comes from in the [rows, K] matrix (`outer` indexes lines, `inner` runs
  // along the contiguous dim).
  struct Chunk {
    uint32_t offset;
    int outer, inner;
  };
  static __host__ __device__ __forceinline__ Chunk chunk(int id, int row0, int k0) {
    const int line = id / kChunks, c = id % kChunks;
    if (KContiguous) return {offset(line, c), row0 + line, k0 + c * 8};
    return {offset(line, c), k0 + line, row0 + c * 8};
  }

  // The shared-memory row lane `lane` hands ldmatrix.x4 to load the 16 (rows) x 16 (k) block at
  // (row0, k0) as four 8 x 8 blocks: 0 = rows 0-7 / k 0-7, 1 = rows 8-15 / k 0-7, 2 = rows 0-7 /
  // k 8-15, 3 = rows 8-15 / k 8-15 — the order of mma's A fragment registers. Lane l addresses row
  // l % 8 of block l / 8. K-contiguous: a block's rows are lines. Rows-contiguous: a block's rows
  // are chunks of 8 k lines, i.e. the block is stored transposed, and is loaded with .trans.
  static __host__ __device__ __forceinline__ uint32_t fragment_row(int lane, int row0, int k0) {
    const int block = lane / 8, i = lane % 8;
    const int row = row0 + (block & 1) * 8, k = k0 + (block >> 1) * 8;
    return KContiguous ? offset(row + i, k / 8) : offset(k + i, row / 8);
  }
};

// One operand as the kernel reads it: a [rows, K] matrix with a unit stride along its contiguous dim
// and `ld` elements between lines (rows if k-contiguous, k indices otherwise).
template <class In>
struct TcOperand {
  const In* data;
  int64_t ld, batch_stride;
};

template <class Out>
struct TcOutput {
  Out* data;
  int64_t row_stride, batch_stride;
  bool pair_stores;  // two adjacent columns can be stored as one 4- or 8-byte access
};

// How many of the 8 elements of a chunk at (outer, inner) lie inside the matrix.
__host__ __device__ __forceinline__ int valid_elements(int outer, int inner, int outer_size, int inner_size) {
  return outer < outer_size ? max(0, min(8, inner_size - inner)) : 0;
}

// Starts the background copy of one operand's slice (rows row0.., k k0..) into shared memory: 512
// chunks, two per thread. A chunk that reaches past the matrix's edge is read element by element
// (none of it, past the last row) and zero-filled; the __syncthreads that follows the
// cp.async wait orders these plain stores for the readers as well.
template <bool KContiguous, class In>
__device__ __forceinline__ void load_slice(uint32_t slice, const In* base, int64_t ld, int rows, int k, int row0,
                                           int k0) {
  using L = SliceLayout<KContiguous>;
  const int outer_size = KContiguous ? rows : k, inner_size = KContiguous ? k : rows;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const typename L::Chunk c = L::chunk(int(threadIdx.x) + j * kBlockThreads, row0, k0);
    const int valid = valid_elements(c.outer, c.inner, outer_size, inner_size);
    if (valid == 8) {
      cp_async_16(slice + c.offset, base + c.outer * ld + c.inner);
    } else {
      uint32_t v[4] = {0, 0, 0, 0};
      if (valid > 0) {  // (past the last row, not even the address is formed)
        const uint16_t* src = reinterpret_cast<const uint16_t*>(base + c.outer * ld + c.inner);
        for (int e = 0; e < valid; ++e) v[e / 2] |= uint32_t(src[e]) << (16 * (e % 2));
      }
      store_shared_16(slice + c.offset, v);
    }
  }
}

// Loads the 16 x 16 block at (row0, k0) of a slice in mma fragment order (see fragment_row).
template <bool KContiguous>
__device__ __forceinline__ void load_fragments(uint32_t (&r)[4], uint32_t slice, int row0, int k0) {
  const int lane = int(threadIdx.x) % 32;
  ldmatrix_x4<!KContiguous>(r, slice + SliceLayout<KContiguous>::fragment_row(lane, row0, k0));
}

template <class In, class Out, bool AKContiguous, bool BKContiguous>
__global__ void __launch_bounds__(kBlockThreads)
    gemm_tensor_core_kernel(int m, int n, int k, TcOperand<In> a, TcOperand<In> bt, TcOutput<Out> c,
                            Epilogue<Out> epilogue, int tiles_m, int tiles_n) {
  // kStages x (A slice, Bᵀ slice): 48 KiB, the most a block may declare statically.
  __shared__ __align__(128) unsigned char smem[kStages * 2 * kSliceBytes];
  const uint32_t smem_base = shared_address(smem);
  auto a_slice = [&](int stage) { return smem_base + uint32_t(stage * 2 * kSliceBytes); };
  auto b_slice = [&](int stage) { return smem_base + uint32_t(stage * 2 * kSliceBytes + kSliceBytes); };

  // Blocks in bands of 8 tile-rows, column by column (as in gemm_tiled.cu), for L2 reuse.
  constexpr int kBand = 8;
  const int band = int(blockIdx.x) / (kBand * tiles_n);
  const int height = min(tiles_m - band * kBand, kBand);
  const int within = int(blockIdx.x) - band * kBand * tiles_n;
  const int m0 = (band * kBand + within % height) * kTile, n0 = (within / height) * kTile;

  const int64_t batch = blockIdx.z;
  const In* a_base = a.data + batch * a.batch_stride;
  const In* b_base = bt.data + batch * bt.batch_stride;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_row = (warp / 4) * kWarpRows, warp_col = (warp % 4) * kWarpCols;

  float acc[kMmaRows][kMmaCols][4] = {};
  const int steps = (k + kStepK - 1) / kStepK;

  auto load_stage = [&](int stage, int step) {
    load_slice<AKContiguous>(a_slice(stage), a_base, a.ld, m, k, m0, step * kStepK);
    load_slice<BKContiguous>(b_slice(stage), b_base, bt.ld, n, k, n0, step * kStepK);
  };

  // Prologue: the first kStages - 1 slices in flight (a group is committed even when empty, so the
  // group count — which cp_async_wait counts in — is the same for every step).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) load_stage(s, s);
    cp_async_commit();
  }

  for (int s = 0; s < steps; ++s) {
    cp_async_wait<kStages - 2>();  // slice s has landed (for this thread's copies) ...
    __syncthreads();               // ... and for everyone's; and everyone is done with slice s - 1
    const int refill = s + kStages - 1;  // goes into the stage slice s - 1 used
    if (refill < steps) load_stage(refill % kStages, refill);
    cp_async_commit();

    const uint32_t as = a_slice(s % kStages), bs = b_slice(s % kStages);
#pragma unroll
    for (int kk = 0; kk < kStepK; kk += 16) {
      uint32_t af[kMmaRows][4];
#pragma unroll
      for (int i = 0; i < kMmaRows; ++i) load_fragments<AKContiguous>(af[i], as, warp_row + i * 16, kk);
      // One x4 load covers two 8-column mma tiles of Bᵀ: blocks 0 and 2 are tile 2j's (k 0-7, 8-15),
      // blocks 1 and 3 tile 2j+1's.
      uint32_t bf[kMmaCols][2];
#pragma unroll
      for (int j = 0; j < kMmaCols / 2; ++j) {
        uint32_t r[4];
        load_fragments<BKContiguous>(r, bs, warp_col + j * 16, kk);
        bf[2 * j][0] = r[0], bf[2 * j][1] = r[2];
        bf[2 * j + 1][0] = r[1], bf[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < kMmaRows; ++i)
#pragma unroll
        for (int j = 0; j < kMmaCols; ++j) mma_16x8x16<In>(acc[i][j], af[i], bf[j]);
    }
  }
  cp_async_wait<0>();  // nothing may still be writing shared memory when the block exits

  // Accumulator fragment: lane holds rows lane/4 and lane/4 + 8, columns 2(lane%4) and +1. A linear
  // layer's bias and activation are applied here, on the way out (epilogue.cuh); `pre`, when kept,
  // has C's layout.
  Out* c_base = c.data + batch * c.batch_stride;
  Out* pre_base = epilogue.pre ? epilogue.pre + batch * c.batch_stride : nullptr;
  const int frag_row = lane / 4, frag_col = 2 * (lane % 4);
#pragma unroll
  for (int i = 0; i < kMmaRows; ++i)
#pragma unroll
    for (int j = 0; j < kMmaCols; ++j) {
      const int col = n0 + warp_col + j * 8 + frag_col;
      if (col >= n) continue;
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // rows frag_row and frag_row + 8
        const int row = m0 + warp_row + i * 16 + frag_row + h * 8;
        if (row >= m) continue;
        const int64_t at = int64_t(row) * c.row_stride + col;
        store_accumulator_pair(epilogue, c_base, pre_base, at, col, acc[i][j][2 * h], acc[i][j][2 * h + 1],
                               c.pair_stores, col + 1 < n);
      }
    }
}

// Whether the kernel can read a [rows, cols] operand along `cols` (inner) or along `rows` (outer
// dim contiguous): unit stride there, and every line starting on a 16-byte boundary.
bool readable_along_cols(const GemmOperand& x, int64_t rows, int64_t cols) {
  return (x.col_stride == 1 || cols == 1) && (rows == 1 || x.row_stride % 8 == 0) && x.batch_stride % 8 == 0 &&
         is_aligned(x.data, 16);
}
bool readable_along_rows(const GemmOperand& x, int64_t rows, int64_t cols) {
  return (x.row_stride == 1 || rows == 1) && (cols == 1 || x.col_stride % 8 == 0) && x.batch_stride % 8 == 0 &&
         is_aligned(x.data, 16);
}

template <class In, class Out, bool AK, bool BK>
void launch(const GemmProblem& p, cudaStream_t stream) {
  // A [m, k]: k-contiguous lines are rows (ld = row stride); otherwise lines are k (ld = col stride).
  const TcOperand<In> a{static_cast<const In*>(p.a.data), AK ? p.a.row_stride : p.a.col_stride, p.a.batch_stride};
  // Bᵀ [n, k]: k-contiguous means B's rows have stride 1, lines are B's columns (ld = col stride).
  const TcOperand<In> bt{static_cast<const In*>(p.b.data), BK ? p.b.col_stride : p.b.row_stride, p.b.batch_stride};
  TcOutput<Out> c{static_cast<Out*>(p.c.data), p.c.row_stride, p.c.batch_stride, false};
  c.pair_stores = (p.m == 1 || p.c.row_stride % 2 == 0) && p.c.batch_stride % 2 == 0 &&
                  reinterpret_cast<uintptr_t>(p.c.data) % (2 * sizeof(Out)) == 0 &&
                  reinterpret_cast<uintptr_t>(p.epilogue.pre) % (2 * sizeof(Out)) == 0;
  const Epilogue<Out> e = epilogue_of<Out>(p.epilogue);
  const int64_t tiles_m = (p.m + kTile - 1) / kTile, tiles_n = (p.n + kTile - 1) / kTile;
  BRIGADE_CHECK(p.m <= INT_MAX && p.n <= INT_MAX && p.k <= INT_MAX && tiles_m * tiles_n <= INT_MAX && p.batch <= 65535, "matmul (tensor_core): problem [", p.m, ", ", p.k,
                "] @ [", p.k, ", ", p.n, "] (batch ", p.batch, ") is too large for one launch");
  const dim3 grid(unsigned(tiles_m * tiles_n), 1, unsigned(p.batch));
  gemm_tensor_core_kernel<In, Out, AK, BK>
      <<<grid, kBlockThreads, 0, stream>>>(int(p.m), int(p.n), int(p.k), a, bt, c, e, int(tiles_m), int(tiles_n));
  BRIGADE_CUDA_CHECK_LAUNCH();
}

// Picks the kernel for the operands' layouts (A: along k or along m; B: along k or along n).
template <class In, class Out>
void launch_for_layouts(const GemmProblem& p, cudaStream_t stream) {
  const bool ak = readable_along_cols(p.a, p.m, p.k);
  const bool bk = !readable_along_cols(p.b, p.k, p.n);  // prefer B read along n (row-major B)
  if (ak && bk) return launch<In, Out, true, true>(p, stream);
  if (ak) return launch<In, Out, true, false>(p, stream);
  if (bk) return launch<In, Out, false, true>(p, stream);
  return launch<In, Out, false, false>(p, stream);
}

}  // namespace

bool tensor_core_can_read(const GemmOperand& x, int64_t rows, int64_t cols) {
  return readable_along_cols(x, rows, cols) || readable_along_rows(x, rows, cols);
}

void gemm_tensor_core(const GemmProblem& p, cudaStream_t stream) {
  BRIGADE_CHECK(tensor_core_can_read(p.a, p.m, p.k) && tensor_core_can_read(p.b, p.k, p.n),
                "matmul (tensor_core): operands need a unit stride and 16-byte aligned lines");
  const bool wide_out = p.out == DType::f32;
  switch (p.in) {
    case DType::bf16:
      return wide_out ? launch_for_layouts<bf16, float>(p, stream) : launch_for_layouts<bf16, bf16>(p, stream);
    case DType::f16:
      return wide_out ? launch_for_layouts<f16, float>(p, stream) : launch_for_layouts<f16, f16>(p, stream);
    default:
      fail("matmul (tensor_core): no kernel for ", dtype_name(p.in), " inputs (bf16 and f16 only)");
  }
}

}  // namespace brigade::cuda
