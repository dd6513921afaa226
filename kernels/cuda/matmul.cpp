// cuda::matmul: from batched tensor views to GEMM problems (kernels/cuda/gemm.h), and to the backend.
//
// The op layer hands over out [batch..., m, n] (contiguous) and views a, b with the same batch dims,
// any strides. Three things happen here:
//   1. Operands a backend cannot read are copied: cuBLAS needs a unit stride in one matrix dim, the
//      tensor-core kernel also 16-byte aligned lines. The copies keep broadcast batch dims broadcast
//      (one matrix, not one per batch entry). The tiled kernel reads any strides and never copies.
//   2. Batch dims are collapsed: neighbours merge when every tensor steps across them uniformly, so a
//      contiguous [B, H, m, k] is one batch of B * H; a batch that shares one B and whose rows of A
//      and C run on without a gap becomes rows instead (M grows). Only dims that cannot merge (e.g. a
//      permuted operand) are looped over on the host, one strided-batched launch per outer index.
//   3. Each problem goes to its GEMM on the current stream.
// linear_epilogue is the same path for one 2-D product, with a linear layer's bias and activation
// (kernels/cuda/epilogue.cuh): inside the tensor-core GEMM, or as one pass after the others.
// The tuned backend hands the call to kernels/cuda/gemm_tuner.cpp, which runs it through run_gemm
// on each candidate.
#include <algorithm>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/current.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_call.h"
#include "kernels/cuda/gemm_tuner.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/tensor_map.h"

namespace brigade::cuda {
namespace {

// One batch dim as seen by the three tensors: its size and each tensor's stride along it.
struct BatchDim {
  int64_t size, out, a, b;
};

std::vector<BatchDim> collapse_batch_dims(const Tensor& out, const Tensor& a, const Tensor& b) {
  std::vector<BatchDim> dims;
  for (int64_t d = 0; d < out.dim() - 2; ++d) {
    const BatchDim x{out.size(d), out.stride(d), a.stride(d), b.stride(d)};
    if (x.size == 1) continue;  // its strides never matter
    if (!dims.empty()) {
      BatchDim& prev = dims.back();
      auto uniform = [&](int64_t outer, int64_t inner) { return outer == inner * x.size; };
      if (uniform(prev.out, x.out) && uniform(prev.a, x.a) && uniform(prev.b, x.b)) {
        prev = {prev.size * x.size, x.out, x.a, x.b};
        continue;
      }
    }
    dims.push_back(x);
  }
  return dims;
}

// A copy of x [batch..., rows, cols] in row-major order with each row padded to a multiple of
// `row_multiple` elements, seen with x's shape. Broadcast batch dims (stride 0) stay broadcast.
Tensor packed_copy(const Tensor& x, int64_t row_multiple) {
  Shape compact = x.shape();
  for (int64_t d = 0; d < x.dim() - 2; ++d)
    if (x.stride(d) == 0) compact[size_t(d)] = 1;
  Shape padded = compact;
  padded.back() = (padded.back() + row_multiple - 1) / row_multiple * row_multiple;
  const Tensor storage = empty(padded, x.dtype(), x.device());
  const Strides strides = storage.strides();
  ops::copy_(make_view(storage, compact, strides, 0), make_view(x, compact, x.strides(), x.offset()));
  Strides expanded = strides;
  for (int64_t d = 0; d < x.dim() - 2; ++d)
    if (x.stride(d) == 0) expanded[size_t(d)] = 0;
  return make_view(storage, x.shape(), expanded, 0);
}

GemmOperand operand(const Tensor& x) { return {x.raw_data(), x.stride(-2), x.stride(-1), 0}; }

bool tensor_core_reads(const Tensor& x) {
  for (int64_t d = 0; d < x.dim() - 2; ++d)
    if (x.size(d) > 1 && x.stride(d) % 8 != 0) return false;
  return tensor_core_can_read(operand(x), x.size(-2), x.size(-1));
}

// For the Hopper GEMM: A [.., m, k] contiguous along k (its rows), B [.., k, n] contiguous along k
// (its columns: B is a transposed view, as a linear layer's Wᵀ is), each matrix one that a TMA
// tensor map describes (tensor_map_can_describe: 16-byte aligned start and rows, rows no shorter
// than k), every batch entry 16-byte aligned too. Anything less is copied — never refused by
// gemm_hopper at launch, so a tuned choice of hopper runs on every view of its key.
bool hopper_reads(const Tensor& x, bool is_b) {
  if (is_b) return hopper_reads(x.transpose(-2, -1), false);
  for (int64_t d = 0; d < x.dim() - 2; ++d)
    if (x.size(d) > 1 && x.stride(d) % 8 != 0) return false;
  const bool along_k = x.stride(-1) == 1 || x.size(-1) == 1;
  return along_k && tensor_map_can_describe(x.raw_data(), x.dtype(), x.size(-2), x.size(-1), x.stride(-2));
}

// x itself when `backend` can read it, else a copy it can: for the Hopper GEMM A row-major, or B as
// the transpose of a row-major Bᵀ; for the tensor-core GEMM rows padded to 8 x 16 bits = 16 bytes.
Tensor readable(const Tensor& x, bool is_b, ops::MatmulBackend backend) {
  if (reads_in_place(x, is_b, backend)) return x;
  if (backend == ops::MatmulBackend::hopper)
    return is_b ? packed_copy(x.transpose(-2, -1), 8).transpose(-2, -1) : packed_copy(x, 8);
  return packed_copy(x, backend == ops::MatmulBackend::tensor_core ? 8 : 1);
}

// Runs one problem. The tensor-core GEMM applies an epilogue itself; after the others it is a pass
// of its own over C.
void run(const GemmProblem& p, ops::MatmulBackend backend, Device device, cudaStream_t stream) {
  if (backend == ops::MatmulBackend::tensor_core) return gemm_tensor_core(p, stream);
  if (backend == ops::MatmulBackend::hopper) return gemm_hopper(p, stream);
  GemmProblem plain = p;
  plain.epilogue = {};
  if (backend == ops::MatmulBackend::tiled) gemm_tiled(plain, stream);
  else gemm_cublas(plain, stream);
  if (p.epilogue.active()) apply_epilogue(p, device, stream);
}

const char* at_bytes(const void* p, int64_t elements, size_t element_size) {
  return static_cast<const char*>(p) + elements * int64_t(element_size);
}

GemmEpilogue epilogue_of(const GemmCall& call) {
  GemmEpilogue epilogue;
  epilogue.bias = call.bias.defined() ? call.bias.raw_data() : nullptr;
  epilogue.pre = call.pre.defined() ? call.pre.raw_data() : nullptr;
  epilogue.activation = call.act;
  return epilogue;
}

// The op layer's entry: the tuner picks (and runs) a backend itself; the others run directly.
void gemm(const GemmCall& call, ops::MatmulBackend backend) {
  if (backend == ops::MatmulBackend::tuned) return gemm_tuned(call);
  run_gemm(call, backend);
}

}  // namespace

bool reads_in_place(const Tensor& x, bool is_b, ops::MatmulBackend backend) {
  switch (backend) {
    case ops::MatmulBackend::automatic:
    case ops::MatmulBackend::cublas: return cublas_can_read(x.size(-2), x.size(-1), x.stride(-2), x.stride(-1));
    case ops::MatmulBackend::tensor_core: return tensor_core_reads(x);
    case ops::MatmulBackend::hopper: return hopper_reads(x, is_b);
    default: return true;  // the tiled GEMM reads any strides
  }
}

// out = a @ b with the call's epilogue applied (none for a plain matmul; linear_epilogue's 2-D
// products only).
void run_gemm(const GemmCall& call, ops::MatmulBackend backend) {
  const Tensor &out = call.out, &a = call.a, &b = call.b;
  const GemmEpilogue epilogue = epilogue_of(call);
  BRIGADE_CHECK(backend != ops::MatmulBackend::tuned, "matmul: run_gemm needs a concrete backend, not tuned");
  if (out.numel() == 0) return;
  BRIGADE_CHECK(!epilogue.active() || out.dim() == 2, "matmul: an epilogue needs one 2-D product, got out shape ",
                shape_str(out.shape()));
  cudaStream_t stream = stream_for(out);
  const int64_t m = out.size(-2), n = out.size(-1), k = a.size(-1);
  GemmProblem base;
  base.m = m, base.n = n, base.k = k;
  base.out = out.dtype();
  base.c = {out.raw_data(), out.stride(-2), 0};
  base.epilogue = epilogue;
  if (k == 0) {  // an empty sum: C = 0 (out is contiguous, and all-zero bits are 0.0 in every dtype)
    BRIGADE_CUDA_CHECK(cudaMemsetAsync(out.raw_data(), 0, out.nbytes(), stream));
    if (epilogue.active()) apply_epilogue(base, out.device(), stream);
    return;
  }
  if (backend == ops::MatmulBackend::automatic) backend = ops::MatmulBackend::cublas;
  const Tensor A = readable(a, false, backend), B = readable(b, true, backend);
  base.in = A.dtype();
  base.a = operand(A), base.b = operand(B);

  // A batch dim over which B is shared (stride 0) and along which A's and C's rows simply continue is
  // more rows: [B, T, in] @ Wᵀ is one GEMM with M = B * T, as linear_epilogue runs it — so a layer
  // gets the same GEMM, and the same bits from cuBLAS (whose algorithm depends on the shape), fused
  // or not, and one launch instead of a batch of small ones.
  std::vector<BatchDim> dims = collapse_batch_dims(out, A, B);
  while (!dims.empty() && dims.back().b == 0 && dims.back().out == base.m * base.c.row_stride &&
         dims.back().a == base.m * base.a.row_stride) {
    base.m *= dims.back().size;
    dims.pop_back();
  }
  // The last collapsed batch dim is each launch's batch; the ones before it are looped over here.

  // The Hopper GEMM takes one product a launch; the others a strided batch up to the grid's limit.
  const int64_t max_batch = backend == ops::MatmulBackend::hopper ? 1 : kMaxGemmBatch;
  const BatchDim inner = dims.empty() ? BatchDim{1, 0, 0, 0} : dims.back();
  if (!dims.empty()) dims.pop_back();
  int64_t outer_count = 1;
  for (const BatchDim& d : dims) outer_count *= d.size;

  const size_t in_size = A.element_size(), out_size = out.element_size();
  std::vector<int64_t> index(dims.size(), 0);
  for (int64_t o = 0; o < outer_count; ++o) {
    int64_t off_out = 0, off_a = 0, off_b = 0;
    for (size_t d = 0; d < dims.size(); ++d)
      off_out += index[d] * dims[d].out, off_a += index[d] * dims[d].a, off_b += index[d] * dims[d].b;
    for (int64_t first = 0; first < inner.size; first += max_batch) {
      GemmProblem p = base;
      p.batch = std::min(max_batch, inner.size - first);
      p.a.data = at_bytes(base.a.data, off_a + first * inner.a, in_size);
      p.b.data = at_bytes(base.b.data, off_b + first * inner.b, in_size);
      p.c.data = const_cast<char*>(at_bytes(base.c.data, off_out + first * inner.out, out_size));
      p.a.batch_stride = inner.a, p.b.batch_stride = inner.b, p.c.batch_stride = inner.out;
      run(p, backend, out.device(), stream);
    }
    for (size_t d = dims.size(); d-- > 0;) {  // odometer step over the outer dims
      if (++index[d] < dims[d].size) break;
      index[d] = 0;
    }
  }
}

void matmul(const Tensor& out, const Tensor& a, const Tensor& b) { matmul(out, a, b, ops::matmul_backend()); }

void matmul(const Tensor& out, const Tensor& a, const Tensor& b, ops::MatmulBackend backend) {
  gemm(GemmCall{out, a, b, Tensor(), Tensor(), Activation::none}, backend);
}

void linear_epilogue(const Tensor& out, const Tensor& pre, const Tensor& a, const Tensor& b, const Tensor& bias,
                     Activation act) {
  linear_epilogue(out, pre, a, b, bias, act, ops::matmul_backend());
}

void linear_epilogue(const Tensor& out, const Tensor& pre, const Tensor& a, const Tensor& b, const Tensor& bias,
                     Activation act, ops::MatmulBackend backend) {
  gemm(GemmCall{out, a, b, bias, pre, act}, backend);
}

}  // namespace brigade::cuda
