#include "mfu.h"

#include <algorithm>
#include <chrono>

#include "bench/environment.h"
#include "core/factory.h"
#include "core/rng.h"
#include "kernels/ops.h"

namespace brigade::train {

double training_flops_per_token(const nn::GPT& model) {
  const nn::GPTConfig& c = model.config();
  // The whole model's (a pipeline rank's model holds only its layers), minus the position embedding
  // (a llama has none).
  const int64_t positions = c.arch == nn::Arch::gpt2 ? c.block_size * c.n_embd : 0;
  const double N = double(nn::GPT::whole_parameter_count(c) - positions);
  return 6.0 * N + 12.0 * double(c.n_layer) * double(c.n_embd) * double(c.block_size);
}

double table_peak(const std::string& gpu_name, DType dtype) {
  // Dense tensor-core throughput for bf16/f16, plain FP32 for f32 (brigade does not use TF32), from
  // NVIDIA's data sheets, in TFLOP/s. The first name a GPU's name contains wins, so the more specific
  // names come first.
  struct Row {
    const char* name;
    double half, f32;
  };
  static const Row rows[] = {
      {"GH200", 989.4, 66.9}, {"H200 NVL", 835.0, 60.0}, {"H200", 989.4, 66.9},    {"H100 PCIe", 756.0, 51.2},
      {"H100 NVL", 835.0, 60.0}, {"H100", 989.4, 66.9},   {"A100", 312.0, 19.5},     {"L40S", 362.0, 91.6},
      {"A10G", 70.0, 31.2},     {"RTX 4090", 165.2, 82.6}, {"B200", 2250.0, 80.0},
  };
  for (const Row& r : rows)
    if (gpu_name.find(r.name) != std::string::npos) {
      const double tflops = dtype == DType::f32 ? r.f32 : (dtype == DType::bf16 || dtype == DType::f16) ? r.half : 0.0;
      return tflops * 1e12;
    }
  return 0;
}

Peak device_peak(Device device, DType dtype) {
  if (device.is_cuda()) {
    const std::string name = bench::describe_environment(device).gpu_name;
    const double peak = table_peak(name, dtype);
    if (peak == 0) return {0, "no peak listed for '" + name + "' in tools/train/mfu.cpp"};
    return {peak, name + ", " + dtype_name(dtype) + " dense (data-sheet table)"};
  }
  // The CPU: the best of a few 512^3 f32 GEMMs through ops::matmul, after one to warm the caches and
  // the thread pool. It is the same kernel the model's linear layers run, so MFU here says how much
  // time goes elsewhere.
  const int64_t n = 512;
  Generator gen(1);
  const Tensor a = randn({n, n}, DType::f32, device, &gen), b = randn({n, n}, DType::f32, device, &gen);
  ops::matmul(a, b);
  // The best of at least 5 and at most about a quarter of a second of repetitions: the best, because
  // anything else running on the machine only ever makes a repetition slower.
  double best = 1e30, spent = 0;
  for (int rep = 0; rep < 5 || (spent < 0.25 && rep < 100); ++rep) {
    const auto start = std::chrono::steady_clock::now();
    ops::matmul(a, b);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, seconds);
    spent += seconds;
  }
  return {2.0 * double(n * n * n) / best, "measured f32 GEMM 512^3 on this CPU"};
}

}  // namespace brigade::train
