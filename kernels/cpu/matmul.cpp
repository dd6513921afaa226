// CPU matmul: a packed, cache-blocked GEMM (the classic Goto/BLIS design) and the naive reference.
//
// How the fast path computes C = A @ B:
//   1. C is cut into tiles of at most NC columns and as many rows as keep the threads busy; tiles
//      (across all batch entries) are the unit of threading, so no two threads ever write the same
//      element.
//   2. For one tile, K is walked in blocks of KC. Each block packs the tile's slice of B (KC x NC)
//      once, in exactly the order the micro-kernel reads it, and the tile's rows go past it MC at a
//      time: A's rows are read in place when they are contiguous, else packed (MC x KC) too. Packing
//      is where strides are consumed: a transposed or sliced view costs nothing extra, and the
//      packed panels stay hot in L1/L2 while they are reused.
//   3. The micro-kernel multiplies an MR-row panel of A by an NR-column panel of packed B,
//      keeping the whole MR x NR block of C in registers for the length of the K block: per step it
//      loads MR + NR values and does MR * NR fused multiply-adds.
// Each element of C sums its K products in the same order whatever the thread count (the K blocks
// are visited in order within one task), so results are reproducible.
//
// The micro-kernel is portable C++ with GCC/Clang vector types, no intrinsics. The build has no
// -march flags, so on x86-64 the hot loop is compiled twice — for AVX2 + FMA with 32-byte vectors,
// and for the baseline ISA with 16-byte ones — and the first call checks which one the CPU can run.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/activation_math.h"
#include "kernels/cpu/elementwise_avx2.h"

// x86-64: build an AVX2 + FMA variant of the hot loop next to the baseline one, and pick at run time.
#if defined(__x86_64__) && defined(__GNUC__)
#define BRIGADE_GEMM_AVX2 1
#include <immintrin.h>
#endif

namespace brigade::cpu {
namespace {

// Block sizes. MR x NR is the register block: 6 rows x 64 bytes of columns is 12 AVX2 registers of
// accumulators (of 16), leaving room for the B row and the broadcast A value. KC x NC of packed B
// (256 KiB for f32) stays in L2; an MR x KC sliver of packed A (6 KiB) stays in L1.
template <class T>
struct Blocking {
  static constexpr int MR = 6;
  static constexpr int NR = 64 / int(sizeof(T));  // 16 floats or 8 doubles
  static constexpr int64_t KC = 256;
  static constexpr int64_t MC = 16 * MR;
  static constexpr int64_t NC = 256 * 4 / int64_t(sizeof(T));  // 256 floats or 128 doubles
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

#ifdef BRIGADE_GEMM_AVX2
bool cpu_has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

// dst[q * W + i] = src[i * stride + q] for i, q < 8: an 8 x 8 block transposed in registers (rows
// interleaved in pairs, then in fours, then the 128-bit halves swapped), eight loads and eight
// stores instead of 64 of each.
[[gnu::target("avx2")]] void transpose_8x8(float* dst, int64_t W, const float* src, int64_t stride) {
  __m256 r[8], t[8], s[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * stride);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);      // r_i[0] r_i+1[0] r_i[1] r_i+1[1] | the same for 4, 5
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);  // ... for 2, 3 | 6, 7
  }
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));          // column 0 | 4 of rows i..i+3
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));      // column 1 | 5
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));  // column 2 | 6
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));  // column 3 | 7
  }
  for (int q = 0; q < 4; ++q) {
    _mm256_storeu_ps(dst + q * W, _mm256_permute2f128_ps(s[q], s[q + 4], 0x20));        // column q
    _mm256_storeu_ps(dst + (q + 4) * W, _mm256_permute2f128_ps(s[q], s[q + 4], 0x31));  // column q + 4
  }
}
#endif

// Copies a `rows` x kc slice of a matrix into one packed panel: dst[p * W + r] = src(r, p) for r < rows,
// zero for rows <= r < W (so the micro-kernel never needs a bounds check). The loop runs along
// whichever source dim is contiguous, so row-major and transposed inputs both read sequentially.
// A transposing copy of f32 (p contiguous: a weight W read as W^T, the usual B of a linear layer)
// moves 8 x 8 blocks through registers where the CPU has AVX2.
template <class T>
void pack_panel(T* dst, int W, const T* src, int64_t rows, int64_t kc, int64_t r_stride, int64_t p_stride) {
  int64_t r0 = 0;  // rows [0, r0) are done
#ifdef BRIGADE_GEMM_AVX2
  if constexpr (std::is_same_v<T, float>) {
    if (p_stride == 1 && r_stride != 1 && cpu_has_avx2_fma()) {
      for (; r0 + 8 <= rows; r0 += 8) {
        int64_t p = 0;
        for (; p + 8 <= kc; p += 8) transpose_8x8(dst + p * W + r0, W, src + r0 * r_stride + p, r_stride);
        for (int64_t r = r0; r < r0 + 8; ++r)
          for (int64_t q = p; q < kc; ++q) dst[q * W + r] = src[r * r_stride + q];
      }
    }
  }
#endif
  if (p_stride == 1 || r_stride != 1) {
    for (int64_t r = r0; r < rows; ++r)
      for (int64_t p = 0; p < kc; ++p) dst[p * W + r] = src[r * r_stride + p * p_stride];
  } else {
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t r = 0; r < rows; ++r) dst[p * W + r] = src[r + p * p_stride];
  }
  for (int64_t p = 0; p < kc; ++p)
    for (int64_t r = rows; r < W; ++r) dst[p * W + r] = T(0);
}

// Packs rows [i0, i0 + mc) x cols [p0, p0 + kc) of A into panels of MR rows: panel r holds, for each
// p in turn, the MR values A(i0 + r*MR + 0..MR-1, p0 + p).
template <class T>
void pack_a(T* dst, const MatrixView<const T>& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc) {
  constexpr int MR = Blocking<T>::MR;
  for (int64_t r = 0; r < mc; r += MR, dst += MR * kc)
    pack_panel(dst, MR, &a(i0 + r, p0), std::min<int64_t>(MR, mc - r), kc, a.row_stride, a.col_stride);
}

// Packs rows [p0, p0 + kc) x cols [j0, j0 + nc) of B into panels of NR columns: panel s holds, for
// each p in turn, the NR values B(p0 + p, j0 + s*NR + 0..NR-1). (A panel of B is a panel of B^T.)
template <class T>
void pack_b(T* dst, const MatrixView<const T>& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc) {
  constexpr int NR = Blocking<T>::NR;
  for (int64_t s = 0; s < nc; s += NR, dst += NR * kc)
    pack_panel(dst, NR, &b(p0, j0 + s), std::min<int64_t>(NR, nc - s), kc, b.col_stride, b.row_stride);
}

// GCC/Clang vector types: Vector<float, 32>::type is 8 floats that live in one AVX2 register,
// Vector<float, 16>::type is 4 floats in one SSE/NEON register. Arithmetic on them is elementwise,
// and `scalar * vector` broadcasts the scalar.
template <class T, int Bytes> struct Vector;
template <> struct Vector<float, 16> { typedef float type __attribute__((vector_size(16))); };
template <> struct Vector<float, 32> { typedef float type __attribute__((vector_size(32))); };
template <> struct Vector<double, 16> { typedef double type __attribute__((vector_size(16))); };
template <> struct Vector<double, 32> { typedef double type __attribute__((vector_size(32))); };

// tile[MR][NR] = an A panel (MR rows x kc) times a packed B panel (kc x NR), with vectors of VecBytes.
// The A panel's value (i, p) is at a[p * p_step + i * i_step]: a packed panel has p_step = MR and
// i_step = 1; MR rows read in place from a row-major A have p_step = 1 and i_step = the row stride
// (six sequential streams, one per row, which the prefetchers follow as well as a packed panel).
//
// The accumulators are an MR x (2 vectors) block: 12 registers, which with the two B vectors and
// the broadcast A value fits the 16 vector registers of both SSE and AVX2 without spilling. With
// AVX2 that block is all NR columns at once; with 16-byte vectors the kernel makes two passes over
// the column halves (re-reading the small A panel, which is in L1).
//
// The block goes to `out` (row stride ld, columns adjacent), stored or added (`accumulate`) a vector
// at a time: straight into C for a whole block of a C with unit column stride, else into a scratch
// tile that macro_kernel copies out element by element. Either way each element of C gets one
// addition per K block (its old value + this block's sum), so both routes give the same bits.
template <class T, int VecBytes>
[[gnu::always_inline]] inline void micro_kernel(int64_t kc, const T* __restrict a, int64_t p_step, int64_t i_step,
                                                const T* __restrict b, T* __restrict out, int64_t ld,
                                                bool accumulate) {
  constexpr int MR = Blocking<T>::MR, NR = Blocking<T>::NR;
  using Vec = typename Vector<T, VecBytes>::type;
  constexpr int W = int(sizeof(Vec) / sizeof(T));  // values per vector
  static_assert(NR % (2 * W) == 0, "NR must be a whole number of 2-vector column blocks");
  for (int j0 = 0; j0 < NR; j0 += 2 * W) {
    Vec acc[MR][2] = {};
    const T* ap = a;
    const T* bp = b + j0;
    for (int64_t p = 0; p < kc; ++p, ap += p_step, bp += NR) {
      Vec row[2];
      std::memcpy(&row[0], bp, sizeof(Vec));  // unaligned vector loads
      std::memcpy(&row[1], bp + W, sizeof(Vec));
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        acc[i][0] += ap[i * i_step] * row[0];
        acc[i][1] += ap[i * i_step] * row[1];
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      T* row = out + i * ld + j0;
      if (accumulate) {
        Vec old[2];
        std::memcpy(&old[0], row, sizeof(Vec));
        std::memcpy(&old[1], row + W, sizeof(Vec));
        acc[i][0] = old[0] + acc[i][0];
        acc[i][1] = old[1] + acc[i][1];
      }
      std::memcpy(row, &acc[i][0], sizeof(Vec));
      std::memcpy(row + W, &acc[i][1], sizeof(Vec));
    }
  }
}

// Where a macro kernel's rows of A come from: packed panels (data = the packed block), or read in
// place (data = &A(first row, first p), row_stride its row stride) when A's rows are contiguous.
// Reading in place skips packing A, which for the short K of small models (64-256) costs a
// sizeable fraction of the multiply itself. A last panel of fewer than MR rows is still packed (into
// `edge`), so the kernel never reads past A's last row.
template <class T>
struct ASource {
  const T* data;
  int64_t row_stride;  // 0: packed
};

// C block (mc x nc, at c) = or += A block @ packed B block, one register block at a time.
// The B panel is the outer loop so it stays in L1 while the A panels stream past it.
template <class T, int VecBytes>
[[gnu::always_inline]] inline void macro_kernel(int64_t mc, int64_t nc, int64_t kc, ASource<T> a,
                                                const T* packed_b, const MatrixView<T>& c, bool accumulate) {
  constexpr int MR = Blocking<T>::MR, NR = Blocking<T>::NR;
  alignas(64) T tile[MR * NR];
  alignas(64) T edge[MR * Blocking<T>::KC];
  const bool in_place = a.row_stride != 0;
  const int64_t full_rows = in_place ? mc / MR * MR : mc;  // rows read in place; the rest packed into `edge`
  if (in_place && full_rows < mc)
    pack_panel(edge, MR, a.data + full_rows * a.row_stride, mc - full_rows, kc, a.row_stride, 1);
  for (int64_t j = 0; j < nc; j += NR) {
    const int64_t cols = std::min<int64_t>(NR, nc - j);
    for (int64_t i = 0; i < mc; i += MR) {
      const int64_t rows = std::min<int64_t>(MR, mc - i);
      // A whole block of a C with adjacent columns is written in place; edges go through `tile`.
      const bool direct = rows == MR && cols == NR && c.col_stride == 1;
      T* out = direct ? &c(i, j) : tile;
      const int64_t ld = direct ? c.row_stride : NR;
      const bool add = direct && accumulate;
      if (!in_place) micro_kernel<T, VecBytes>(kc, a.data + i * kc, MR, 1, packed_b + j * kc, out, ld, add);
      else if (i < full_rows) micro_kernel<T, VecBytes>(kc, a.data + i * a.row_stride, 1, a.row_stride, packed_b + j * kc, out, ld, add);
      else micro_kernel<T, VecBytes>(kc, edge, MR, 1, packed_b + j * kc, out, ld, add);
      if (direct) continue;
      for (int64_t ii = 0; ii < rows; ++ii) {
        T* out = &c(i + ii, j);
        const T* t = tile + ii * NR;
        if (accumulate) {
          for (int64_t jj = 0; jj < cols; ++jj) out[jj * c.col_stride] += t[jj];
        } else {
          for (int64_t jj = 0; jj < cols; ++jj) out[jj * c.col_stride] = t[jj];
        }
      }
    }
  }
}

#ifdef BRIGADE_GEMM_AVX2
// The same loops compiled for AVX2 + FMA (the build itself targets baseline x86-64).
[[gnu::target("avx2,fma")]] void macro_kernel_avx2(int64_t mc, int64_t nc, int64_t kc, ASource<float> a,
                                                   const float* pb, const MatrixView<float>& c, bool accumulate) {
  macro_kernel<float, 32>(mc, nc, kc, a, pb, c, accumulate);
}
[[gnu::target("avx2,fma")]] void macro_kernel_avx2(int64_t mc, int64_t nc, int64_t kc, ASource<double> a,
                                                   const double* pb, const MatrixView<double>& c, bool accumulate) {
  macro_kernel<double, 32>(mc, nc, kc, a, pb, c, accumulate);
}
#endif

template <class T>
void run_macro_kernel(int64_t mc, int64_t nc, int64_t kc, ASource<T> a, const T* pb, const MatrixView<T>& c,
                      bool accumulate) {
#ifdef BRIGADE_GEMM_AVX2
  if (cpu_has_avx2_fma()) return macro_kernel_avx2(mc, nc, kc, a, pb, c, accumulate);
#endif
  macro_kernel<T, 16>(mc, nc, kc, a, pb, c, accumulate);
}

// Computes one tile of C: rows [i0, i0 + mc), cols [j0, j0 + nc), over all of K. For each block of
// KC along K, the tile's columns of B are packed once and stay in L2 while the rows go past in
// blocks of MC, each packed in turn (the loop order of Goto and van de Geijn's GEMM). A tile spans
// many MC row blocks, so B is packed once per tile rather than once per MC rows: packing a block of
// B costs about as much as multiplying it by a few rows of A. The pack buffers are per thread and
// reused across calls.
//
// `epilogue(c, i, rows, j0, nc)` runs on each block of MC rows right after its last K block, while
// the block (MC x NC, 96 KiB of f32) is still in L2.
template <class T, class Epilogue>
void compute_tile(const MatrixView<T>& c, const MatrixView<const T>& a, const MatrixView<const T>& b, int64_t i0,
                  int64_t mc, int64_t j0, int64_t nc, bool accumulate, const Epilogue& epilogue) {
  using B = Blocking<T>;
  const int64_t k = a.cols;
  if (k == 0) {  // an empty sum: C = 0 (or unchanged when accumulating)
    if (!accumulate)
      for (int64_t i = 0; i < mc; ++i)
        for (int64_t j = 0; j < nc; ++j) c(i0 + i, j0 + j) = T(0);
    epilogue(c, i0, mc, j0, nc);
    return;
  }
  thread_local std::vector<T> packed_a, packed_b;
  packed_a.resize(size_t(ceil_div(std::min(mc, B::MC), B::MR) * B::MR * std::min(k, B::KC)));
  packed_b.resize(size_t(ceil_div(nc, B::NR) * B::NR * std::min(k, B::KC)));
  for (int64_t p0 = 0; p0 < k; p0 += B::KC) {
    const int64_t kc = std::min(B::KC, k - p0);
    pack_b(packed_b.data(), b, p0, kc, j0, nc);
    for (int64_t i = i0; i < i0 + mc; i += B::MC) {
      const int64_t rows = std::min(B::MC, i0 + mc - i);
      ASource<T> source{&a(i, p0), a.row_stride};
      if (a.col_stride != 1 || a.row_stride == 0) {
        pack_a(packed_a.data(), a, i, rows, p0, kc);
        source = {packed_a.data(), 0};
      }
      const MatrixView<T> c_block{&c(i, j0), rows, nc, c.row_stride, c.col_stride};
      run_macro_kernel(rows, nc, kc, source, packed_b.data(), c_block, accumulate || p0 > 0);
      if (p0 + kc == k) epilogue(c, i, rows, j0, nc);
    }
  }
}

// How C is cut into tiles, one per task: at most NC columns, and rows as many as keep every thread
// busy — all of them when the column strips alone are enough, else split evenly (on register-block
// boundaries) until the tile count is a multiple of the thread count or large enough to even out.
// Tile shape never changes any element's sum (that is fixed by KC), so it may depend on the thread count.
struct Tiling {
  int64_t rows, cols;      // tile size
  int64_t count_m, count_n;  // tiles along m and n
};

template <class T>
Tiling choose_tiling(int64_t batch, int64_t m, int64_t n, int64_t k) {
  using B = Blocking<T>;
  auto even_split = [](int64_t size, int64_t pieces, int64_t multiple) {
    return ceil_div(ceil_div(size, pieces), multiple) * multiple;
  };
  int64_t count_n = ceil_div(n, B::NC);
  const int64_t cols = even_split(n, count_n, B::NR);
  count_n = ceil_div(n, cols);
  int64_t rows = even_split(m, 1, B::MR);
  const int64_t threads = num_threads();
  constexpr int64_t kMinTileWork = int64_t(1) << 21;  // multiply-adds
  auto tiles = [&] { return batch * ceil_div(m, rows) * count_n; };
  while (tiles() % threads != 0 && tiles() < 8 * threads && rows > B::MR) {
    const int64_t finer = even_split(m, ceil_div(m, rows) + 1, B::MR);
    if (finer == rows || finer * cols * k < kMinTileWork) break;
    rows = finer;
  }
  return {rows, cols, ceil_div(m, rows), count_n};
}

// What runs on a block of C right after its last K block, while the block is still in cache: nothing
// for a plain matmul; linear_epilogue's bias and activation.
struct NoEpilogue {
  template <class T>
  void operator()(const MatrixView<T>&, int64_t, int64_t, int64_t, int64_t) const {}
};

// Runs every tile of `batch` products c_i (+)= a_i @ b_i on the thread pool, with `epilogue` on each
// finished block (compute_tile). `matrices(i)` returns the three views of product i; all products
// share m, n and k.
template <class T, class Matrices, class Epilogue = NoEpilogue>
void batched_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const Matrices& matrices, bool accumulate,
                  const Epilogue& epilogue = {}) {
  if (batch == 0 || m == 0 || n == 0) return;
  const Tiling tiling = choose_tiling<T>(batch, m, n, k);
  const int64_t tiles = tiling.count_m * tiling.count_n;
  // Handing work to another thread costs tens of microseconds, so each thread's share must be at
  // least ~4M multiply-adds (measured on 2 cores: below ~2M, one thread alone is faster).
  constexpr int64_t kMinChunkWork = int64_t(1) << 22;
  const int64_t work_per_tile = std::min(m, tiling.rows) * std::min(n, tiling.cols) * std::max<int64_t>(k, 1);
  const int64_t grain = ceil_div(kMinChunkWork, work_per_tile);
  parallel_for(batch * tiles, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const auto [c, a, b] = matrices(t / tiles);
      const int64_t i0 = (t % tiles) / tiling.count_n * tiling.rows;
      const int64_t j0 = (t % tiles) % tiling.count_n * tiling.cols;
      const int64_t mc = std::min(tiling.rows, m - i0), nc = std::min(tiling.cols, n - j0);
      compute_tile<T>(c, a, b, i0, mc, j0, nc, accumulate, epilogue);
    }
  });
}

template <class T>
void gemm_impl(const MatrixView<T>& c, const MatrixView<const T>& a, const MatrixView<const T>& b, bool accumulate) {
  auto matrices = [&](int64_t) { return std::tuple{c, a, b}; };
  batched_gemm<T>(1, c.rows, c.cols, a.cols, matrices, accumulate);
}

// Element offsets of each matrix in a batched tensor [batch..., rows, cols], batch entries in
// row-major order (broadcast batch dims have stride 0, so entries may share a matrix).
std::vector<int64_t> batch_offsets(const Tensor& t) {
  const int64_t batch_dims = t.dim() - 2;
  Shape batch_shape(t.shape().begin(), t.shape().begin() + batch_dims);
  std::vector<int64_t> offsets(size_t(shape_numel(batch_shape)));
  std::vector<int64_t> index(size_t(batch_dims), 0);
  for (int64_t& off : offsets) {
    off = 0;
    for (int64_t d = 0; d < batch_dims; ++d) off += index[size_t(d)] * t.stride(d);
    for (int64_t d = batch_dims - 1; d >= 0; --d) {  // odometer step
      if (++index[size_t(d)] < batch_shape[size_t(d)]) break;
      index[size_t(d)] = 0;
    }
  }
  return offsets;
}

// out[j] = gelu(x[j]) for one contiguous row segment, by the same instructions the gelu op
// (kernels/cpu/elementwise.cpp) uses, so a fused epilogue gives the unfused bits.
void gelu_row(float* out, const float* x, int64_t n) {
  if (avx2::available() && avx2::unary_f32(ops::UnaryOp::gelu, out, x, n)) return;
  for (int64_t j = 0; j < n; ++j) out[j] = gelu(x[j]);
}
void gelu_row(double* out, const double* x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = gelu(x[j]);
}

// The i-th matrix of a batched tensor as a view.
template <class T>
MatrixView<T> matrix_at(const Tensor& t, T* base, int64_t offset) {
  return {base + offset, t.size(-2), t.size(-1), t.stride(-2), t.stride(-1)};
}

}  // namespace

void gemm(const MatrixView<float>& c, const MatrixView<const float>& a, const MatrixView<const float>& b,
          bool accumulate) {
  gemm_impl<float>(c, a, b, accumulate);
}

void gemm(const MatrixView<double>& c, const MatrixView<const double>& a, const MatrixView<const double>& b,
          bool accumulate) {
  gemm_impl<double>(c, a, b, accumulate);
}

void matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  visit_float(out.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    const std::vector<int64_t> off_c = batch_offsets(out), off_a = batch_offsets(a), off_b = batch_offsets(b);
    T* pc = out.data<T>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    auto matrices = [&](int64_t i) {
      const size_t s = size_t(i);
      return std::tuple{matrix_at(out, pc, off_c[s]), matrix_at(a, pa, off_a[s]), matrix_at(b, pb, off_b[s])};
    };
    batched_gemm<T>(int64_t(off_c.size()), out.size(-2), out.size(-1), a.size(-1), matrices, false);
  });
}

// linear_epilogue: the GEMM writes a @ b into pre (or straight into out when pre is not kept), and
// each finished block of rows gets its bias and activation at once, one row segment at a time.
void linear_epilogue(const Tensor& out, const Tensor& pre, const Tensor& a, const Tensor& b, const Tensor& bias,
                     Activation act) {
  visit_float(out.dtype(), "linear_epilogue", [&](auto tag) {
    using T = decltype(tag);
    const Tensor& sum = pre.defined() ? pre : out;
    const MatrixView<T> c = matrix_at(sum, sum.data<T>(), 0);
    const MatrixView<const T> x = matrix_at(a, static_cast<const T*>(a.data<T>()), 0);
    const MatrixView<const T> y = matrix_at(b, static_cast<const T*>(b.data<T>()), 0);
    const T* bias_data = bias.defined() ? bias.data<T>() : nullptr;
    T* out_data = out.data<T>();
    const int64_t n = out.size(-1);
    auto finish = [&](const MatrixView<T>& tile_of_c, int64_t i0, int64_t mc, int64_t j0, int64_t nc) {
      for (int64_t i = i0; i < i0 + mc; ++i) {
        T* row = &tile_of_c(i, j0);
        if (bias_data)
          for (int64_t j = 0; j < nc; ++j) row[j] += bias_data[j0 + j];
        if (act == Activation::gelu) gelu_row(out_data + i * n + j0, row, nc);
      }
    };
    auto matrices = [&](int64_t) { return std::tuple{c, x, y}; };
    batched_gemm<T>(1, c.rows, c.cols, x.cols, matrices, false, finish);
  });
}

void matmul_naive(const Tensor& out, const Tensor& a, const Tensor& b) {
  visit_float(out.dtype(), "matmul_naive", [&](auto tag) {
    using T = decltype(tag);
    const std::vector<int64_t> off_c = batch_offsets(out), off_a = batch_offsets(a), off_b = batch_offsets(b);
    for (size_t s = 0; s < off_c.size(); ++s) {
      const MatrixView<T> c = matrix_at(out, out.data<T>(), off_c[s]);
      const MatrixView<const T> x = matrix_at(a, static_cast<const T*>(a.data<T>()), off_a[s]);
      const MatrixView<const T> y = matrix_at(b, static_cast<const T*>(b.data<T>()), off_b[s]);
      for (int64_t i = 0; i < c.rows; ++i)
        for (int64_t j = 0; j < c.cols; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < x.cols; ++p) sum += double(x(i, p)) * double(y(p, j));
          c(i, j) = T(sum);
        }
    }
  });
}

}  // namespace brigade::cpu
