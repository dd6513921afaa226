// Every op on the GPU against its CPU reference, forward and backward.
//
// In the spirit of ggml's test-backend-ops: the cases are a table (tests/gpu/cases_*.h, one entry per
// op, dtype, shape and memory layout), each registered as its own Catch2 test named
// "op: inputs (details)" and tagged [gpu_ops][op]:
//
//     test_gpu_ops --list-tests            the coverage, case by case
//     test_gpu_ops --list-tags             the ops covered and how many cases each has
//     test_gpu_ops "[softmax]"             one op
//     BRIGADE_TEST_SEED=123 test_gpu_ops   replay a run (every run draws fresh data and prints its seed)
//
// Each case runs the op under a Tape on the CPU and on cuda:0 with identical inputs and upstream
// gradients, and compares every output and every input gradient by NMSE (compare.h). All CUDA memory
// comes from a guarded allocator (guarded_allocator.h): fresh memory is NaN and every block has guard
// bytes around it, so unwritten outputs and out-of-bounds writes fail the case that caused them.
//
// Below the table: the checks that are not "same inputs, compare outputs" — the guard self-test, the
// random generators, the dropout mask, embedding determinism, the multi-tensor AdamW, streams.
#include <catch2/catch.hpp>

#if BRIGADE_HAVE_CUDA

#include <cuda_runtime.h>

#include "cases_attention.h"
#include "cases_elementwise.h"
#include "cases_llama.h"
#include "cases_matmul_conv.h"
#include "cases_nn.h"
#include "cases_reduce.h"
#include "cases_views.h"
#include "core/cuda/current.h"
#include "kernels/cuda/gemm.h"

namespace gpu_test {
namespace {

const bool registered = [] {
  std::mt19937_64 rng(run_seed());  // the randomly sized cases depend on the run's seed only
  register_cases(binary_cases(rng));
  register_cases(unary_cases(rng));
  register_cases(masked_fill_cases());
  register_cases(sum_mean_cases(rng));
  register_cases(max_cases());
  register_cases(sum_to_cases());
  register_cases(softmax_cases());
  register_cases(matmul_cases(rng));
  register_cases(linear_cases());
  register_cases(norm_cases());
  register_cases(embedding_cases());
  register_cases(cross_entropy_cases());
  register_cases(dropout_cases());
  register_cases(attention_cases());
  register_cases(rope_cases());
  register_cases(swiglu_cases());
  register_cases(grouped_attention_cases());
  register_cases(conv_cases());
  register_cases(pool_cases());
  register_cases(join_cases());
  register_cases(view_cases());
  register_cases(copy_cases());
  register_cases(inplace_cases());
  return true;
}();

const Device kGpu = Device::cuda(0);

// Random CPU values for the hand-written checks below.
Tensor random_cpu(const Shape& shape, DType dtype, uint64_t salt, double scale = 1.0) {
  Generator gen(case_seed("manual") + salt);
  return ops::to_dtype(ops::scale_shift(randn(shape, DType::f64, Device::cpu(), &gen), scale, 0.0), dtype);
}

// The start of every hand-written check: the run's seed on screen, no stale allocator findings.
void start_clean() {
  announce_seed_once();
  guarded_allocator().take_problems();
}

std::vector<double> host_values(const Tensor& t) { return t.detach().to(Device::cpu()).to_vector(); }

void require_bitwise_equal(const Tensor& gpu, const Tensor& cpu) {
  REQUIRE(gpu.device().is_cuda());
  REQUIRE(shape_str(gpu.shape()) == shape_str(cpu.shape()));
  REQUIRE(gpu.dtype() == cpu.dtype());
  const std::vector<double> g = host_values(gpu), c = cpu.to_vector();
  for (size_t i = 0; i < c.size(); ++i) {
    if (g[i] == c[i] || (std::isnan(g[i]) && std::isnan(c[i]))) continue;
    FAIL("element " << i << ": GPU " << g[i] << ", CPU " << c[i]);
  }
}

}  // namespace

// ---- the test of the test: the guarded allocator must see what it is there to see ----

TEST_CASE("guarded allocator: fresh memory is NaN and overruns are caught", "[gpu_ops][guards]") {
  start_clean();
  INFO("run seed " << run_seed());
  SECTION("fresh memory reads as NaN in every floating dtype") {
    for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
      const std::vector<double> v = host_values(empty({5}, t, kGpu));
      for (double x : v) CHECK(std::isnan(x));
    }
  }
  SECTION("a write one byte past the end is reported when the block is freed") {
    if (guarded_allocator().exact()) return;  // exact allocations have no guards (memcheck's job then)
    {
      Tensor t = empty({5}, DType::f32, kGpu);
      // The guards were filled on brigade's (non-blocking) current stream: let that land first, or
      // this write on the legacy stream could come before it and be painted over.
      current_stream(kGpu).synchronize();
      REQUIRE(cudaMemset(static_cast<char*>(t.raw_data()) + 5 * sizeof(float), 0, 1) == cudaSuccess);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    }
    const std::vector<std::string> problems = guarded_allocator().take_problems();
    REQUIRE(problems.size() == 1);
    CHECK_THAT(problems[0], Catch::Contains("byte 20 of a 20-byte block") && Catch::Contains("back guard"));
  }
  SECTION("a write just before the start is reported while the block is live") {
    if (guarded_allocator().exact()) return;
    Tensor t = empty({3}, DType::bf16, kGpu);
    current_stream(kGpu).synchronize();  // as above: the guard fill first
    REQUIRE(cudaMemset(static_cast<char*>(t.raw_data()) - 2, 0, 2) == cudaSuccess);
    guarded_allocator().check_live_blocks();
    const std::vector<std::string> problems = guarded_allocator().take_problems();
    REQUIRE(problems.size() == 1);
    CHECK_THAT(problems[0], Catch::Contains("byte -2 of a 6-byte block") && Catch::Contains("front guard"));
    REQUIRE(cudaMemset(static_cast<char*>(t.raw_data()) - 2, GuardedAllocator::kGuardByte, 2) == cudaSuccess);
  }
  check_guards();
}

// ---- random numbers: the same counters give the same numbers on every device ----

TEST_CASE("randn and uniform on cuda equal the CPU's bit for bit", "[gpu_ops][rng]") {
  start_clean();
  INFO("run seed " << run_seed());
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    for (int64_t n : {1, 3, 4, 5, 1029, 100003}) {
      INFO(dtype_name(t) << " n " << n);
      const uint64_t seed = case_seed("rng") + uint64_t(n);
      Generator on_cpu(seed), on_gpu(seed);
      on_cpu.advance(5), on_gpu.advance(5);  // an offset that is not a multiple of 4 (Philox's block)
      require_bitwise_equal(randn({n}, t, kGpu, &on_gpu), randn({n}, t, Device::cpu(), &on_cpu));
      require_bitwise_equal(uniform({n}, -2.0, 3.0, t, kGpu, &on_gpu), uniform({n}, -2.0, 3.0, t, Device::cpu(), &on_cpu));
      CHECK(on_gpu.offset == on_cpu.offset);
    }
  }
  check_guards();
}

// ---- dropout: the mask is a function of (seed, offset + i), whatever the device ----

TEST_CASE("dropout drops the same elements on cuda as on the CPU", "[gpu_ops][dropout]") {
  start_clean();
  INFO("run seed " << run_seed());
  const Tensor x = random_cpu({1000003}, DType::f32, 1);
  for (double p : {0.1, 0.5, 0.9}) {
    const uint64_t seed = case_seed("dropout"), offset = 12345;
    const std::vector<double> cpu = ops::dropout(x, p, seed, offset).to_vector();
    const std::vector<double> gpu = host_values(ops::dropout(x.to(kGpu), p, seed, offset));
    REQUIRE(gpu.size() == cpu.size());
    size_t dropped = 0, differ = 0;
    for (size_t i = 0; i < cpu.size(); ++i) {
      dropped += cpu[i] == 0;
      differ += (cpu[i] == 0) != (gpu[i] == 0);
    }
    INFO("p " << p << ": " << differ << " of " << cpu.size() << " mask elements differ");
    CHECK(differ == 0);
    CHECK(std::abs(double(dropped) / double(cpu.size()) - p) < 0.01);
    // Backward recomputes the same mask from (seed, offset).
    const Tensor g = random_cpu({1000003}, DType::f32, 2);
    require_bitwise_equal(ops::dropout_backward(g.to(kGpu), p, seed, offset), ops::dropout_backward(g, p, seed, offset));
  }
  check_guards();
}

// ---- embedding backward: no float atomics, so two runs are bitwise equal ----

TEST_CASE("embedding backward on cuda is deterministic", "[gpu_ops][embedding]") {
  start_clean();
  INFO("run seed " << run_seed());
  for (DType t : {DType::f32, DType::bf16}) {
    // 5 rows hit ~40000 times each: any order-dependent summation shows up in the low bits.
    std::vector<double> idx(200003);
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = double((i * 7919) % 5);
    const Tensor indices = from_vector(idx, {int64_t(idx.size())}, DType::i64, kGpu);
    const Tensor grad = random_cpu({int64_t(idx.size()), 96}, t, 3).to(kGpu);
    const std::vector<double> first = host_values(ops::embedding_backward(grad, indices, 5));
    for (int run = 0; run < 3; ++run) {
      const std::vector<double> again = host_values(ops::embedding_backward(grad, indices, 5));
      REQUIRE(again == first);
    }
  }
  check_guards();
}

// The sorted backward adds each row's run in position order, as the CPU does, accumulating in f32
// and rounding once: its results are the CPU's bit for bit, on the vector path (96 columns) and the
// one-column path (22: not a whole number of f32 or bf16 vectors), runs of ~600 included.
TEST_CASE("embedding backward on cuda equals the CPU's bit for bit", "[gpu_ops][embedding]") {
  start_clean();
  INFO("run seed " << run_seed());
  for (DType t : {DType::f32, DType::bf16}) {
    for (int64_t d : {96, 22}) {
      INFO(dtype_name(t) << ", " << d << " columns");
      std::vector<double> idx(3001);
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = double((i * 7919) % 5);
      const Tensor indices = from_vector(idx, {int64_t(idx.size())}, DType::i64, Device::cpu());
      const Tensor grad = random_cpu({int64_t(idx.size()), d}, t, 4);
      require_bitwise_equal(ops::embedding_backward(grad.to(kGpu), indices.to(kGpu), 6),
                            ops::embedding_backward(grad, indices, 6));
    }
  }
  check_guards();
}

// ---- attention backward: no float atomics, so two runs are bitwise equal ----

TEST_CASE("attention backward on cuda is deterministic", "[gpu_ops][attention]") {
  start_clean();
  INFO("run seed " << run_seed());
  struct Path {
    DType dtype;
    int64_t t, head_dim;  // bf16 at 64: tensor cores; f32 at 40: the generic kernels
  };
  for (Path path : {Path{DType::bf16, 100, 64}, Path{DType::f32, 33, 40}}) {
    INFO(dtype_name(path.dtype) << " head dim " << path.head_dim);
    const Shape shape = {1, 2, path.t, path.head_dim};
    const Tensor q = random_cpu(shape, path.dtype, 20).to(kGpu), k = random_cpu(shape, path.dtype, 21).to(kGpu),
                 v = random_cpu(shape, path.dtype, 22).to(kGpu), gy = random_cpu(shape, path.dtype, 23).to(kGpu);
    AttentionParams p;
    p.dropout = 0.1, p.seed = 7, p.offset = 3;
    const ops::AttentionOutput out = ops::attention(q, k, v, p);
    const ops::AttentionGrads first = ops::attention_backward(gy, q, k, v, out, p);
    const ops::AttentionGrads again = ops::attention_backward(gy, q, k, v, out, p);
    CHECK(host_values(again.q) == host_values(first.q));
    CHECK(host_values(again.k) == host_values(first.k));
    CHECK(host_values(again.v) == host_values(first.v));
  }
  check_guards();
}

// ---- fused epilogues: the bits of the separate ops, on the device ----

TEST_CASE("linear's fused bias + gelu equals matmul, add and gelu apart, bit for bit on cuda", "[gpu_ops][fused]") {
  start_clean();
  INFO("run seed " << run_seed());
  struct Path {
    ops::MatmulBackend backend;
    DType dtype;
  };
  for (Path path : {Path{ops::MatmulBackend::tensor_core, DType::bf16}, Path{ops::MatmulBackend::tensor_core, DType::f16},
                    Path{ops::MatmulBackend::hopper, DType::bf16}, Path{ops::MatmulBackend::hopper, DType::f16},
                    Path{ops::MatmulBackend::cublas, DType::bf16}, Path{ops::MatmulBackend::cublas, DType::f32},
                    Path{ops::MatmulBackend::tiled, DType::f32}}) {
    if (!ops::matmul_backend_available(path.backend, kGpu)) continue;  // hopper: sm_90 only
    // 131 or 2 x 66 rows (a 3-D input: the unfused matmul must run the same one GEMM); 259 and 256
    // columns: full and partial 128-wide tiles, unpaired and paired stores.
    for (const Shape& x_shape : {Shape{131, 72}, Shape{2, 66, 72}}) {
      for (int64_t n : {int64_t(259), int64_t(256)}) {
        INFO(ops::matmul_backend_name(path.backend) << " " << dtype_name(path.dtype) << " x " << shape_str(x_shape)
                                                    << ", " << n << " outputs");
        const Tensor x = random_cpu(x_shape, path.dtype, 30, 2.0).to(kGpu);
        const Tensor w = random_cpu({n, 72}, path.dtype, 31, 0.3).to(kGpu), b = random_cpu({n}, path.dtype, 32).to(kGpu);
        const ops::LinearOutput fused = ops::linear(x, w, b, Activation::gelu, true, path.backend);
        const Tensor product = ops::matmul(x, w.transpose(0, 1), path.backend);
        const Tensor pre = ops::binary(ops::BinaryOp::add, product, b);
        CHECK(host_values(fused.pre) == host_values(pre));
        CHECK(host_values(fused.y) == host_values(ops::unary(ops::UnaryOp::gelu, pre)));
        // Bias only (every Linear): the epilogue without an activation; nothing kept.
        const ops::LinearOutput biased = ops::linear(x, w, b, Activation::none, false, path.backend);
        CHECK(host_values(biased.y) == host_values(pre));
      }
    }
  }
  check_guards();
}

// The epilogue pass after cuBLAS walks C with a grid-stride loop that carries each element's column
// along: past 132 x 16 blocks of 256 threads (540,672 elements) every thread wraps round at least once.
TEST_CASE("the epilogue pass keeps its columns right when its threads loop over C", "[gpu_ops][fused]") {
  start_clean();
  const int64_t rows = 2100, n = 259, k = 8;  // 543,900 elements
  const Tensor x = random_cpu({rows, k}, DType::f32, 60).to(kGpu), w = random_cpu({n, k}, DType::f32, 61).to(kGpu);
  const Tensor b = random_cpu({n}, DType::f32, 62).to(kGpu);
  const ops::LinearOutput fused = ops::linear(x, w, b, Activation::gelu, true, ops::MatmulBackend::cublas);
  const Tensor pre = ops::binary(ops::BinaryOp::add, ops::matmul(x, w.transpose(0, 1), ops::MatmulBackend::cublas), b);
  CHECK(host_values(fused.pre) == host_values(pre));
  CHECK(host_values(fused.y) == host_values(ops::unary(ops::UnaryOp::gelu, pre)));
  check_guards();
}

// The Hopper GEMM is persistent: each block walks tiles blockIdx.x, + gridDim.x, ... with its ring of
// buffers running on from tile to tile. Fewer blocks than tiles (1, 2, 3 for 4 x 3 tiles) make every
// block cross tiles mid-ring; the product must not change, and must match an f64 CPU reference.
TEST_CASE("the hopper GEMM gives the same product however many tiles each block walks", "[gpu_ops][hopper]") {
  if (!ops::matmul_backend_available(ops::MatmulBackend::hopper, kGpu)) {
    WARN("no sm_90 GPU, or a build without gpu_arch 90: the hopper GEMM is not tested here");
    return;
  }
  start_clean();
  INFO("run seed " << run_seed());
  const int64_t m = 4 * 128 - 37, n = 3 * 128 - 5, k = 3 * 64 + 24;  // partial tiles and a partial K slice
  for (DType dtype : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dtype));
    const Tensor a = random_cpu({m, k}, dtype, 50), w = random_cpu({n, k}, dtype, 51);
    const Tensor a_gpu = a.to(kGpu), w_gpu = w.to(kGpu);
    std::vector<double> reference(size_t(m * n)), magnitude(size_t(m * n));
    const std::vector<double> av = host_values(a), wv = host_values(w);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, abs_sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          sum += av[size_t(i * k + p)] * wv[size_t(j * k + p)];
          abs_sum += std::abs(av[size_t(i * k + p)] * wv[size_t(j * k + p)]);
        }
        reference[size_t(i * n + j)] = sum;
        magnitude[size_t(i * n + j)] = abs_sum;
      }
    std::vector<double> first;
    for (int blocks : {1, 2, 3, 0}) {  // 0: one block per SM (as many as there are tiles here)
      INFO(blocks << " blocks");
      const Tensor c = empty({m, n}, DType::f32, kGpu);
      cuda::GemmProblem p;
      p.m = m, p.n = n, p.k = k, p.in = dtype, p.out = DType::f32;
      p.a = {a_gpu.raw_data(), k, 1, 0};
      p.b = {w_gpu.raw_data(), 1, k, 0};  // B = Wᵀ: k contiguous
      p.c = {c.raw_data(), n, 0};
      REQUIRE(cuda::hopper_can_read(p));
      cuda::gemm_hopper(p, cuda::stream_for(c), blocks);
      const std::vector<double> got = host_values(c);
      // Products of 16-bit values are exact in f32; summing K of them in f32 errs by at most
      // K * u * sum |a_p w_p|: u = 2^-24 rounding to nearest, 2^-23 for tensor cores, which have
      // been measured truncating while they align and add (Fasi et al., 2021).
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::abs(got[i] - reference[i]) / (double(k) * std::ldexp(1.0, -23) * magnitude[i] + 1e-30));
      CHECK(worst <= 1.0);
      if (first.empty()) first = got;
      CHECK(got == first);  // the same sums in the same order, whoever computes the tile
    }
  }
  check_guards();
}

TEST_CASE("add_layer_norm equals add then layer_norm, bit for bit on cuda, both ways", "[gpu_ops][fused]") {
  start_clean();
  INFO("run seed " << run_seed());
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (int64_t d : {int64_t(96), int64_t(1500)}) {  // a warp per row; a block per row
      INFO(dtype_name(dtype) << " rows of " << d);
      const Tensor x = random_cpu({7, d}, dtype, 40).to(kGpu), r = random_cpu({7, d}, dtype, 41).to(kGpu);
      const Tensor w = random_cpu({d}, dtype, 42).to(kGpu), b = random_cpu({d}, dtype, 43).to(kGpu);
      const Tensor gy = random_cpu({7, d}, dtype, 44).to(kGpu), gh = random_cpu({7, d}, dtype, 45).to(kGpu);
      const ops::AddNormOutput fused = ops::add_layer_norm(x, r, w, b, 1e-5);
      const Tensor sum = ops::binary(ops::BinaryOp::add, x, r);
      const ops::NormOutput apart = ops::layer_norm(sum, w, b, 1e-5);
      CHECK(host_values(fused.sum) == host_values(sum));
      CHECK(host_values(fused.norm.y) == host_values(apart.y));
      CHECK(host_values(fused.norm.rstd) == host_values(apart.rstd));
      const Tensor grad = ops::add_layer_norm_backward_input(gy, gh, fused.sum, w, fused.norm);
      const Tensor grad_apart =
          ops::binary(ops::BinaryOp::add, gh, ops::layer_norm_backward_input(gy, sum, w, apart));
      CHECK(host_values(grad) == host_values(grad_apart));
    }
  }
  check_guards();
}

// ---- AdamW: one launch for a list of tensors of awkward sizes ----

TEST_CASE("adamw_step_ updates many tensors on cuda as on the CPU", "[gpu_ops][adamw]") {
  start_clean();
  INFO("run seed " << run_seed());
  const std::vector<Shape> shapes = {{1}, {3}, {17}, {33, 17}, {127}, {257, 3}, {4099}, {65537}, {(1 << 20) + 3}};
  struct Kind {
    DType param, state;
  };
  for (Kind kind : {Kind{DType::f32, DType::f32}, Kind{DType::bf16, DType::f32}, Kind{DType::f64, DType::f64}}) {
    INFO("params " << dtype_name(kind.param) << ", state " << dtype_name(kind.state));
    std::vector<Tensor> p_cpu, g_cpu, m_cpu, v_cpu, p_gpu, g_gpu, m_gpu, v_gpu;
    // The same values into both lists (the GPU copy made before any update).
    auto add = [](std::vector<Tensor>& on_cpu, std::vector<Tensor>& on_gpu, const Tensor& values) {
      on_cpu.push_back(values);
      on_gpu.push_back(values.to(kGpu));
    };
    uint64_t salt = 10;
    for (const Shape& s : shapes) {
      add(p_cpu, p_gpu, random_cpu(s, kind.param, salt++));
      add(g_cpu, g_gpu, random_cpu(s, kind.param, salt++, 0.1));
      add(m_cpu, m_gpu, random_cpu(s, kind.state, salt++, 0.01));
      add(v_cpu, v_gpu, ops::unary(ops::UnaryOp::exp, random_cpu(s, kind.state, salt++)));  // positive
    }
    ops::AdamWParams hp{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .step = 1};
    for (int64_t step = 1; step <= 3; ++step) {
      hp.step = step;
      ops::adamw_step_(p_cpu, g_cpu, m_cpu, v_cpu, hp);
      ops::adamw_step_(p_gpu, g_gpu, m_gpu, v_gpu, hp);
    }
    const Tolerance param_tol = tolerance(Accuracy::elementwise, kind.param);
    const Tolerance state_tol = tolerance(Accuracy::elementwise, kind.state);
    for (size_t i = 0; i < shapes.size(); ++i) {
      check_matches("param " + std::to_string(i), p_gpu[i], p_cpu[i], param_tol);
      check_matches("exp_avg " + std::to_string(i), m_gpu[i], m_cpu[i], state_tol);
      check_matches("exp_avg_sq " + std::to_string(i), v_gpu[i], v_cpu[i], state_tol);
    }
  }
  check_guards();
}

// ---- conv through cuDNN on views at odd offsets (aligned to the element size only) ----

TEST_CASE("conv2d on cuDNN reads inputs sliced at unaligned offsets", "[gpu_ops][conv]") {
  start_clean();
  INFO("run seed " << run_seed());
  for (DType t : {DType::f32, DType::bf16}) {
    INFO(dtype_name(t));
    // Samples of 3 x 5 x 5 = 75 elements: sample 1 starts 150 bytes (bf16) or 300 bytes (f32) in,
    // neither a multiple of 16.
    const Tensor batch = random_cpu({3, 3, 5, 5}, t, 7), weight = random_cpu({4, 3, 3, 3}, t, 8);
    const Tensor x_cpu = batch.slice(0, 1, 3), x_gpu = batch.to(kGpu).slice(0, 1, 3);
    REQUIRE(reinterpret_cast<uintptr_t>(x_gpu.raw_data()) % 16 != 0);
    const ops::Conv2dParams p{.stride = 1, .padding = 1};
    const Tensor y = ops::conv2d(x_gpu, weight.to(kGpu), Tensor(), p);
    check_matches("conv2d", y, ops::conv2d(x_cpu, weight, Tensor(), p), tolerance(Accuracy::gemm, t));
    const Tensor gy_batch = random_cpu({3, 4, 5, 5}, t, 9);
    const Tensor gy_cpu = gy_batch.slice(0, 1, 3), gy_gpu = gy_batch.to(kGpu).slice(0, 1, 3);
    check_matches("conv2d_backward_input", ops::conv2d_backward_input(gy_gpu, weight.to(kGpu), x_cpu.shape(), p),
                  ops::conv2d_backward_input(gy_cpu, weight, x_cpu.shape(), p), tolerance(Accuracy::gemm, t));
    check_matches("conv2d_backward_weight", ops::conv2d_backward_weight(gy_gpu, x_gpu, weight.shape(), p),
                  ops::conv2d_backward_weight(gy_cpu, x_cpu, weight.shape(), p), tolerance(Accuracy::gemm, t));
  }
  check_guards();
}

// ---- streams: kernels run on the current stream, so work under a StreamGuard is ordered ----

TEST_CASE("ops launched under a StreamGuard run on that stream", "[gpu_ops][streams]") {
  start_clean();
  INFO("run seed " << run_seed());
  const Tensor a = random_cpu({257, 129}, DType::f32, 4), b = random_cpu({129, 65}, DType::f32, 5);
  const Tensor expected = ops::softmax(ops::binary(ops::BinaryOp::add, ops::matmul(a, b), b.select(0, 0)), -1);
  Stream side = Stream::create(kGpu);
  Tensor got;
  {
    StreamGuard on_side(side);
    const Tensor ga = a.to(kGpu), gb = b.to(kGpu);
    got = ops::softmax(ops::binary(ops::BinaryOp::add, ops::matmul(ga, gb), gb.select(0, 0)), -1);
    // Nothing was queued on the thread's default stream: only `side` has work, and syncing it is
    // enough to read the result.
    side.synchronize();
  }
  std::string why;
  if (!within(compare(host_values(got), expected.to_vector()), tolerance(Accuracy::gemm, DType::f32), why))
    FAIL_CHECK(why);
  check_guards();
}

// ---- errors: a GPU op given a CPU tensor says which is where ----

TEST_CASE("mixing devices in one op is an error naming both", "[gpu_ops][errors]") {
  const Tensor on_gpu = zeros({2, 3}, DType::f32, kGpu), on_cpu = zeros({2, 3});
  REQUIRE_THROWS_WITH(ops::binary(ops::BinaryOp::add, on_gpu, on_cpu),
                      Catch::Contains("cuda:0") && Catch::Contains("cpu"));
  REQUIRE_THROWS_WITH(ops::matmul(on_cpu, on_gpu.transpose(0, 1)), Catch::Contains("cuda:0"));
}

}  // namespace gpu_test

#endif  // BRIGADE_HAVE_CUDA
