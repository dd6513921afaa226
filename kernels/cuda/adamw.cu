// CUDA kernels: AdamW over many tensors at once ("multi-tensor apply").
//
// A model has dozens to hundreds of parameter tensors, many of them small (biases, norm weights).
// One launch per tensor would make the optimizer step a long string of tiny kernels, each too short
// to fill the GPU. Instead one launch updates a whole table of tensors: the table — pointers and
// sizes, a few KB — travels as the kernel's argument, every tensor is cut into chunks of kChunk
// elements, and each block takes one chunk of one tensor. A block finds its tensor by looking its
// chunk number up in the table's running chunk counts.
//
// The math per element is the CPU reference's (kernels/cpu/adamw.cpp), in the same order, in the
// compute type (f32, or f64 for f64 parameters); bf16/f16 parameters are rounded once on store.
//
// On the GPU (the contract both backends share: kernels/twins/adamw.inc):
// Parameters in f32, f64, bf16 or f16, each with a gradient of its own dtype (the op layer converts
// others — so an f32 gradient of a bf16 weight arrives rounded to bf16, where the CPU path keeps it in
// f32) and f32 or f64 state (m, v). 16-bit parameters update in f32 and are rounded once. Contiguous entries are updated by one
// multi-tensor launch per group of up to a few dozen tensors of one dtype pair; strided entries (rare:
// parameters are normally contiguous) get one elementwise launch each.
#include <cmath>

#include "core/cuda/capture.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/optimizer_kernels.h"
#include "kernels/cuda/common.cuh"

namespace brigade::cuda {
namespace {

constexpr int kMaxTensors = 48;      // per launch: keeps the table well under the 4 KB argument limit
constexpr int64_t kChunk = 16384;    // elements per block: 64 per thread
constexpr int kAdamThreads = 256;

// The scalars of one step, computed once on the host in f64 and rounded to the compute type C —
// the same values the CPU's Coefficients<T> holds.
template <class C>
struct Coefficients {
  C decay;  // 1 - lr * wd
  C beta1, beta2, one_minus_beta1, one_minus_beta2;
  C step_size;   // lr / (1 - b1^t)
  C sqrt_bias2;  // sqrt(1 - b2^t)
  C eps;
};

template <class C>
Coefficients<C> coefficients(const ops::AdamWParams& p) {
  return {C(1 - p.lr * p.weight_decay),
          C(p.beta1),
          C(p.beta2),
          C(1 - p.beta1),
          C(1 - p.beta2),
          C(p.lr / (1 - std::pow(p.beta1, double(p.step)))),
          C(std::sqrt(1 - std::pow(p.beta2, double(p.step)))),
          C(p.eps)};
}

// The coefficients of one step for both compute types, as staged in device memory for a step that a
// CUDA graph can replay (adamw_step_staged): the kernels read them there instead of from their
// arguments, so each replay uses the step count and learning rate staged just before it.
struct StagedCoefficients {
  Coefficients<float> f32;
  Coefficients<double> f64;
};
template <class C> __device__ __forceinline__ const Coefficients<C>& staged_for(const StagedCoefficients& s);
template <> __device__ __forceinline__ const Coefficients<float>& staged_for<float>(const StagedCoefficients& s) {
  return s.f32;
}
template <> __device__ __forceinline__ const Coefficients<double>& staged_for<double>(const StagedCoefficients& s) {
  return s.f64;
}
// The coefficients a launch uses: its argument, or the staged ones when there are any.
template <class C>
__device__ __forceinline__ Coefficients<C> coefficients_of(const Coefficients<C>& c, const StagedCoefficients* staged) {
  return staged ? staged_for<C>(*staged) : c;
}

// One element's update. P is the parameter's storage type, S the state's.
template <class P, class S>
__device__ __forceinline__ void update(P& param, P grad, S& m, S& v, const Coefficients<compute_t<P>>& c) {
  using C = compute_t<P>;
  const C g = to_compute(grad);
  const C mt = c.beta1 * C(m) + c.one_minus_beta1 * g;
  const C vt = c.beta2 * C(v) + c.one_minus_beta2 * g * g;
  m = S(mt);
  v = S(vt);
  param = from_compute<P>(to_compute(param) * c.decay - c.step_size * mt / (dev_sqrt(vt) / c.sqrt_bias2 + c.eps));
}

// ---- many contiguous tensors, one launch ----

template <class P, class S>
struct TensorTable {
  P* param[kMaxTensors];
  const P* grad[kMaxTensors];
  S* m[kMaxTensors];
  S* v[kMaxTensors];
  int64_t numel[kMaxTensors];
  int64_t first_chunk[kMaxTensors + 1];  // tensor t owns chunks [first_chunk[t], first_chunk[t + 1])
  int count;
};
// Kernel arguments beyond 4 KB need CUDA 12.1+ on the host and a recent driver; stay below.
static_assert(sizeof(TensorTable<double, double>) + sizeof(Coefficients<double>) < 4096);

template <class P, class S>
__global__ void adamw_multi_tensor_kernel(TensorTable<P, S> table, Coefficients<compute_t<P>> given,
                                          const StagedCoefficients* staged) {
  const Coefficients<compute_t<P>> c = coefficients_of(given, staged);
  const int64_t chunk = blockIdx.x;
  int t = 0;
  while (chunk >= table.first_chunk[t + 1]) ++t;  // at most kMaxTensors steps, same for the whole block
  const int64_t begin = (chunk - table.first_chunk[t]) * kChunk;
  const int64_t end = begin + kChunk < table.numel[t] ? begin + kChunk : table.numel[t];
  P* param = table.param[t];
  const P* grad = table.grad[t];
  S* m = table.m[t];
  S* v = table.v[t];
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) update(param[i], grad[i], m[i], v[i], c);
}

template <class P, class S>
void launch_table(TensorTable<P, S>& table, const Coefficients<compute_t<P>>& c, const StagedCoefficients* staged,
                  cudaStream_t stream) {
  if (table.count == 0) return;
  const int64_t chunks = table.first_chunk[table.count];
  if (chunks > 0) {
    adamw_multi_tensor_kernel<P, S><<<unsigned(chunks), kAdamThreads, 0, stream>>>(table, c, staged);
    BRIGADE_CUDA_CHECK_LAUNCH();
  }
  table.count = 0;
}

// ---- one strided tensor ----

template <class Index, class P, class S>
__global__ void adamw_strided_kernel(Index n, StridedLayout<4> layout, P* param, const P* grad, S* m, S* v,
                                     Coefficients<compute_t<P>> given, const StagedCoefficients* staged) {
  const Coefficients<compute_t<P>> c = coefficients_of(given, staged);
  BRIGADE_GRID_STRIDE_LOOP(i, n, Index) {
    int64_t off[4];
    layout.offsets(i, off);
    update(param[off[0]], grad[off[1]], m[off[2]], v[off[3]], c);
  }
}

template <class P, class S>
void launch_strided(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                    const Coefficients<compute_t<P>>& c, const StagedCoefficients* staged, cudaStream_t stream) {
  const int64_t n = param.numel();
  if (n == 0) return;
  const StridedLayout<4> layout = make_layout<4>("adamw_step_", param.shape(), {&param, &grad, &m, &v});
  auto* pp = static_cast<P*>(param.raw_data());
  const auto* gp = static_cast<const P*>(grad.raw_data());
  auto* mp = static_cast<S*>(m.raw_data());
  auto* vp = static_cast<S*>(v.raw_data());
  const unsigned blocks = grid_for(n, param.device());
  if (n <= int64_t(INT32_MAX))
    adamw_strided_kernel<uint32_t><<<blocks, kThreads, 0, stream>>>(uint32_t(n), layout, pp, gp, mp, vp, c, staged);
  else
    adamw_strided_kernel<uint64_t><<<blocks, kThreads, 0, stream>>>(uint64_t(n), layout, pp, gp, mp, vp, c, staged);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

// Every entry whose parameter has storage type P and state type S: contiguous ones into tables of
// up to kMaxTensors (one launch per full table), strided ones one by one.
template <class P, class S>
void step_group(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& m,
                const std::vector<Tensor>& v, const ops::AdamWParams& p, const StagedCoefficients* staged,
                cudaStream_t stream) {
  const Coefficients<compute_t<P>> c = coefficients<compute_t<P>>(p);
  TensorTable<P, S> table{};  // zeroed: no stale addresses in unused slots (the emulator reads them)
  table.count = 0;
  table.first_chunk[0] = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].dtype() != dtype_of<P>() || m[i].dtype() != dtype_of<S>()) continue;
    const bool flat = params[i].is_contiguous() && grads[i].is_contiguous() && m[i].is_contiguous() &&
                      v[i].is_contiguous();
    if (!flat) {
      launch_strided<P, S>(params[i], grads[i], m[i], v[i], c, staged, stream);
      continue;
    }
    const int k = table.count++;
    table.param[k] = static_cast<P*>(params[i].raw_data());
    table.grad[k] = static_cast<const P*>(grads[i].raw_data());
    table.m[k] = static_cast<S*>(m[i].raw_data());
    table.v[k] = static_cast<S*>(v[i].raw_data());
    table.numel[k] = params[i].numel();
    table.first_chunk[k + 1] = table.first_chunk[k] + ceil_div(table.numel[k], kChunk);
    if (table.count == kMaxTensors) launch_table(table, c, staged, stream);  // resets count; chunks restart at 0
  }
  launch_table(table, c, staged, stream);
}

template <class P>
void step_param_dtype(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                      const std::vector<Tensor>& m, const std::vector<Tensor>& v, const ops::AdamWParams& p,
                      const StagedCoefficients* staged, cudaStream_t stream) {
  step_group<P, float>(params, grads, m, v, p, staged, stream);
  step_group<P, double>(params, grads, m, v, p, staged, stream);
}

void step_every_dtype(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& m,
                      const std::vector<Tensor>& v, const ops::AdamWParams& p, const StagedCoefficients* staged) {
  if (params.empty()) return;
  cudaStream_t stream = stream_for(params[0]);
  step_param_dtype<float>(params, grads, m, v, p, staged, stream);
  step_param_dtype<double>(params, grads, m, v, p, staged, stream);
  step_param_dtype<bf16>(params, grads, m, v, p, staged, stream);
  step_param_dtype<f16>(params, grads, m, v, p, staged, stream);
}

}  // namespace

void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& m,
                const std::vector<Tensor>& v, const ops::AdamWParams& p) {
  step_every_dtype(params, grads, m, v, p, nullptr);
}

size_t adamw_staged_bytes() { return sizeof(StagedCoefficients); }

void adamw_stage(const Tensor& staged, const ops::AdamWParams& p) {
  cudaStream_t stream = stream_for(staged);
  refuse_in_capture("AdamW's staging of a step's coefficients", stream,
                    "the coefficients come from the host at each step: stage them before the replay, outside the graph");
  const StagedCoefficients host{coefficients<float>(p), coefficients<double>(p)};
  // From pageable memory: the runtime has taken the bytes when the call returns, so `host` may go.
  BRIGADE_CUDA_CHECK(cudaMemcpyAsync(staged.raw_data(), &host, sizeof(host), cudaMemcpyHostToDevice, stream));
}

void adamw_step_staged(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& m, const std::vector<Tensor>& v, const Tensor& staged) {
  // The hyperparameters only fill the unused by-value coefficients: every launch reads the staged ones.
  step_every_dtype(params, grads, m, v, ops::AdamWParams{}, static_cast<const StagedCoefficients*>(staged.raw_data()));
}

}  // namespace brigade::cuda
