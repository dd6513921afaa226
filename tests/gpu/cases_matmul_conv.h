// Cross-backend cases: matmul on each of the GPU GEMMs and on the tuned choice among them, linear,
// conv2d on each conv backend, max and average pooling.
#pragma once

#if BRIGADE_HAVE_CUDA

#include "cases_elementwise.h"
#include "kernels/cuda/gemm_tuner.h"

namespace gpu_test {

// Holds a process-wide backend choice for as long as the returned handle lives, then restores the
// previous one. The backward pass runs while the handle lives, so its GEMMs use the backend too.
// The backend for one case; for tuned, every size is tuned (these shapes are all below the tuner's
// default threshold, under which it would simply run cuBLAS).
inline std::function<std::shared_ptr<void>()> with_matmul_backend(ops::MatmulBackend backend) {
  return [backend] {
    const ops::MatmulBackend previous = ops::matmul_backend();
    ops::set_matmul_backend(backend);
    if (backend == ops::MatmulBackend::tuned) {
      cuda::GemmTunerTestHooks hooks;
      hooks.min_flops = 0;
      cuda::set_gemm_tuner_test_hooks(hooks);
    }
    return std::shared_ptr<void>(nullptr, [previous, backend](void*) {
      ops::set_matmul_backend(previous);
      if (backend == ops::MatmulBackend::tuned) cuda::set_gemm_tuner_test_hooks({});
    });
  };
}

inline std::function<std::shared_ptr<void>()> with_conv_backend(ops::ConvBackend backend) {
  return [backend] {
    const ops::ConvBackend previous = ops::conv_backend();
    ops::set_conv_backend(backend);
    return std::shared_ptr<void>(nullptr, [previous](void*) { ops::set_conv_backend(previous); });
  };
}

// matmul: sizes from 1 to past the tile sizes, exact tile multiples, transposed and misaligned
// operands, batches with broadcasting, 1-D operands — on every backend for the dtypes it supports.
inline std::vector<OpCase> matmul_cases(std::mt19937_64& rng) {
  using ops::MatmulBackend;
  struct Gemm {
    Shape a, b;
    Layout la = contiguous, lb = contiguous;
  };
  const int64_t m = random_size(rng), k = random_size(rng), n = random_size(rng);
  const std::vector<Gemm> gemms = {
      {{1, 1}, {1, 1}},
      {{3, 5}, {5, 7}},
      {{17, 33}, {33, 1}},
      {{1, 257}, {257, 3}},
      {{33, 17}, {17, 127}, transposed, contiguous},
      {{127, 129}, {129, 65}, contiguous, transposed},
      {{64, 64}, {64, 64}},          // exactly one tile in every direction
      {{128, 256}, {256, 128}, transposed, transposed},
      {{257, 255}, {255, 253}},
      {{130, 66}, {66, 200}, offset, strided},  // misaligned A, strided B: the kernels' slow paths
      {{2, 3, 17, 33}, {33, 5}},                // batch dims on one side
      {{4, 1, 17, 33}, {3, 33, 9}},             // broadcast batch dims
      {{3, 17, 33}, {3, 33, 9}, expanded, contiguous},  // a batch of stride 0
      {{33}, {33, 9}},                          // 1-D operands, as in NumPy
      {{9, 33}, {33}},
      {{33}, {33}},
      {{m, k}, {k, n}},
      {{2, n, m}, {m, k}, transposed, contiguous},
  };
  struct Backend {
    MatmulBackend backend;
    const char* name;
    std::vector<DType> dtypes;
  };
  const std::vector<Backend> backends = {
      {MatmulBackend::automatic, "automatic", {DType::f32, DType::bf16, DType::f16, DType::f64}},
      {MatmulBackend::cublas, "cublas", {DType::f32, DType::bf16, DType::f16, DType::f64}},
      {MatmulBackend::tiled, "tiled", {DType::f32, DType::bf16, DType::f16}},
      {MatmulBackend::tensor_core, "tensor_core", {DType::bf16, DType::f16}},
      {MatmulBackend::hopper, "hopper", {DType::bf16, DType::f16}},
      // Measures every candidate on each new problem (test_gpu_gemm_tuner.cpp checks the choosing):
      // here, that whatever it picks agrees with the CPU, forward and backward.
      {MatmulBackend::tuned, "tuned", {DType::bf16, DType::f32}},
  };
  std::vector<OpCase> cases;
  for (const Backend& be : backends) {
    if (!ops::matmul_backend_available(be.backend, Device::cuda(0))) continue;  // hopper: sm_90 only
    for (DType t : be.dtypes) {
      for (size_t i = 0; i < gemms.size(); ++i) {
        // f16 and f64 are the rarer dtypes, and tuned runs every GEMM several times: a third of the
        // shapes covers them.
        if ((t == DType::f16 || t == DType::f64 || be.backend == MatmulBackend::tuned) && i % 3 != 0) continue;
        const Gemm& g = gemms[i];
        OpCase c = make_case(
            "matmul", {floats(g.a, t, g.la), floats(g.b, t, g.lb)},
            [](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], in[1])}; }, Accuracy::gemm,
            be.name);
        c.gpu_setup = with_matmul_backend(be.backend);
        cases.push_back(c);
      }
    }
  }
  // Sizes where tiles and pipelines are full and partial at once (the CPU reference is still quick).
  for (const Backend& be : backends) {
    if (be.backend == MatmulBackend::automatic || be.backend == MatmulBackend::tuned ||
        !ops::matmul_backend_available(be.backend, Device::cuda(0)))
      continue;
    const DType t = be.backend == MatmulBackend::tiled ? DType::f32 : DType::bf16;
    OpCase c = make_case(
        "matmul", {floats({513, 1031}, t), floats({1031, 257}, t, transposed)},
        [](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], in[1])}; }, Accuracy::gemm,
        std::string(be.name) + " large");
    c.gpu_setup = with_matmul_backend(be.backend);
    cases.push_back(c);
  }
  return cases;
}

// linear = x @ W^T + b as one node: 3-D inputs, with and without bias.
inline std::vector<OpCase> linear_cases() {
  std::vector<OpCase> cases;
  for (DType t : {DType::f32, DType::bf16}) {
    cases.push_back(make_case(
        "linear", {floats({5, 7, 33}, t), floats({17, 33}, t), floats({17}, t)},
        [](const std::vector<Tensor>& in) { return std::vector<Tensor>{linear(in[0], in[1], in[2])}; },
        Accuracy::gemm, "with bias"));
    cases.push_back(make_case(
        "linear", {floats({1, 1}, t), floats({1, 1}, t), floats({1}, t)},
        [](const std::vector<Tensor>& in) { return std::vector<Tensor>{linear(in[0], in[1], in[2])}; },
        Accuracy::gemm, "with bias"));
    cases.push_back(make_case(
        "linear", {floats({64, 129}, t, transposed), floats({257, 129}, t)},
        [](const std::vector<Tensor>& in) { return std::vector<Tensor>{linear(in[0], in[1], Tensor())}; },
        Accuracy::gemm, "no bias"));
  }
  // The fused epilogue (bias + GELU) on each GEMM: inside the tensor-core GEMM's epilogue, a pass of
  // its own after cuBLAS and the tiled GEMM. Shapes past the 128-wide tiles, odd widths (unpaired
  // stores), and a K of 0 (the epilogue still runs on the zero product).
  struct Fused {
    ops::MatmulBackend backend;
    const char* name;
    DType dtype;
  };
  const Fused fused[] = {{ops::MatmulBackend::tensor_core, "tensor_core", DType::bf16},
                         {ops::MatmulBackend::tensor_core, "tensor_core", DType::f16},
                         {ops::MatmulBackend::hopper, "hopper", DType::bf16},
                         {ops::MatmulBackend::cublas, "cublas", DType::f32},
                         {ops::MatmulBackend::cublas, "cublas", DType::bf16},
                         {ops::MatmulBackend::tiled, "tiled", DType::f32},
                         {ops::MatmulBackend::tuned, "tuned", DType::bf16}};
  for (const Fused& f : fused) {
    if (!ops::matmul_backend_available(f.backend, Device::cuda(0))) continue;
    for (const auto& [x, w, bias] : {std::tuple<Shape, Shape, bool>{{2, 70, 96}, {259, 96}, true},
                                     {{33, 40}, {17, 40}, false},
                                     {{5, 0}, {6, 0}, true}}) {
      std::vector<Input> inputs = {floats(x, f.dtype), floats(w, f.dtype)};
      if (bias) inputs.push_back(floats({w[0]}, f.dtype));
      OpCase c = make_case(
          "linear", inputs,
          [](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{linear(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), Activation::gelu)};
          },
          Accuracy::gemm, std::string("gelu epilogue, ") + f.name + (bias ? "" : ", no bias"));
      c.gpu_setup = with_matmul_backend(f.backend);
      cases.push_back(c);
    }
  }
  return cases;
}

// conv2d on cuDNN and on the direct kernel: strides, padding, odd sizes, 1x1 and 5x5 kernels.
inline std::vector<OpCase> conv_cases() {
  struct Conv {
    Shape x, w;
    int64_t stride, padding;
    bool bias;
  };
  const std::vector<Conv> convs = {
      {{1, 1, 5, 5}, {1, 1, 3, 3}, 1, 0, false},
      {{2, 3, 17, 13}, {4, 3, 3, 3}, 2, 1, true},
      {{3, 4, 9, 9}, {5, 4, 1, 1}, 1, 0, true},
      {{2, 5, 33, 31}, {7, 5, 5, 5}, 1, 2, true},
      {{1, 2, 7, 7}, {3, 2, 7, 7}, 3, 3, false},
      {{4, 16, 28, 28}, {32, 16, 3, 3}, 1, 1, true},
  };
  struct Backend {
    ops::ConvBackend backend;
    const char* name;
  };
  const Backend backends[] = {{ops::ConvBackend::automatic, "automatic"},
#if BRIGADE_HAVE_CUDNN
                              {ops::ConvBackend::cudnn, "cudnn"},
#endif
                              {ops::ConvBackend::direct, "direct"}};
  std::vector<OpCase> cases;
  for (const Backend& be : backends) {
    for (DType t : {DType::f32, DType::bf16}) {
      for (size_t i = 0; i < convs.size(); ++i) {
        const Conv cv = convs[i];
        std::vector<Input> inputs = {floats(cv.x, t, i == 1 ? strided : contiguous), floats(cv.w, t)};
        if (cv.bias) inputs.push_back(floats({cv.w[0]}, t));
        OpCase c = make_case(
            "conv2d", inputs,
            [cv](const std::vector<Tensor>& in) {
              return std::vector<Tensor>{conv2d(in[0], in[1], cv.bias ? in[2] : Tensor(), cv.stride, cv.padding)};
            },
            Accuracy::gemm,
            std::string(be.name) + " stride " + std::to_string(cv.stride) + " padding " + std::to_string(cv.padding));
        c.gpu_setup = with_conv_backend(be.backend);
        cases.push_back(c);
      }
    }
  }
  return cases;
}

// max_pool2d (values, indices, gradient) and avg_pool2d (count_include_pad).
inline std::vector<OpCase> pool_cases() {
  struct Pool {
    Shape x;
    int64_t kernel, stride, padding;
  };
  const std::vector<Pool> pools = {
      {{1, 1, 4, 4}, 2, 2, 0}, {{2, 3, 17, 13}, 3, 2, 1}, {{2, 3, 9, 9}, 3, 1, 0},
      {{1, 2, 7, 5}, 2, 1, 1}, {{4, 16, 28, 28}, 2, 2, 0}, {{2, 2, 1, 1}, 1, 1, 0},
  };
  std::vector<OpCase> cases;
  for (DType t : {DType::f32, DType::bf16}) {
    for (size_t i = 0; i < pools.size(); ++i) {
      const Pool p = pools[i];
      const Layout layout = i == 1 ? transposed : contiguous;
      const std::string detail = "kernel " + std::to_string(p.kernel) + " stride " + std::to_string(p.stride) +
                                 " padding " + std::to_string(p.padding);
      cases.push_back(make_case(
          "max_pool2d", {floats(p.x, t, layout)},
          [p](const std::vector<Tensor>& in) {
            const Tensor indices = ops::max_pool2d(in[0], {p.kernel, p.stride, p.padding}).second;
            return std::vector<Tensor>{max_pool2d(in[0], p.kernel, p.stride, p.padding), indices};
          },
          Accuracy::elementwise, detail));
      cases.push_back(make_case(
          "avg_pool2d", {floats(p.x, t, layout)},
          [p](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{avg_pool2d(in[0], p.kernel, p.stride, p.padding)};
          },
          Accuracy::reduction, detail));
    }
  }
  return cases;
}

}  // namespace gpu_test

#endif  // BRIGADE_HAVE_CUDA
