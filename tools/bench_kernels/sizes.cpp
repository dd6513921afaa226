#include "bench_kernels/sizes.h"

namespace brigade::bench {
namespace {

Sizes gpu_sizes(bool quick) {
  Sizes s;
  // 64 Mi elements: 256 MB per f32 tensor, four times the L2 of the largest GPUs.
  s.elements = quick ? (int64_t(1) << 24) : (int64_t(1) << 26);
  s.elementwise_dtypes = s.memory_dtypes = {DType::f32, DType::bf16};
  s.vocab = 50304;
  s.embedding_tokens = quick ? 4096 : 16384;
  s.loss_rows = quick ? 1024 : 4096;
  s.optimizer_vocab = 50304;  // GPT-2 small: 124M parameters in 148 tensors
  s.optimizer_layers = quick ? 2 : 12;
  s.pool_input = {32, 64, 112, 112};
  s.gemm_squares = quick ? std::vector<int64_t>{1024, 4096} : std::vector<int64_t>{1024, 2048, 4096, 8192};
  s.mlp_tokens = quick ? 4096 : 16384;  // batch 16 x 1024 tokens
  s.gemm_dtypes = {DType::bf16, DType::f32};
  s.conv_layers = {
      {32, 64, 56, 56, 64, 3, 1, 1},
      {32, 128, 28, 28, 128, 3, 1, 1},
      {32, 256, 14, 14, 256, 3, 1, 1},
      {32, 3, 224, 224, 64, 7, 2, 3},  // the stem: few channels, large image
  };
  if (quick) s.conv_layers.resize(2);
  s.conv_dtypes = {DType::f32, DType::bf16};
  // GPT-2 small's attention (12 heads of 64 over 1024 tokens), and a larger model's (16 heads of 128
  // over 2048); bf16 runs on the tensor cores, f32 on the generic kernels.
  s.attention_shapes = {{8, 12, 1024, 64}, {4, 16, 2048, 128}};
  if (quick) s.attention_shapes.resize(1);
  s.attention_dtypes = {DType::bf16, DType::f32};
  return s;
}

// About 1000 times less work than the GPU's, so a full run takes a minute or two on two cores. The
// elementwise tensors (32 MB f32) are as large as a typical server's last-level cache; the cache
// flush before each repeat (bench/cache_flush.h) keeps smaller ones honest too.
Sizes cpu_sizes(bool quick) {
  Sizes s;
  s.elements = quick ? (int64_t(1) << 20) : (int64_t(1) << 23);
  s.elementwise_dtypes = {DType::f32, DType::bf16};
  s.memory_dtypes = {DType::f32};
  s.vocab = quick ? 8192 : 50304;
  s.embedding_tokens = quick ? 512 : 4096;
  s.loss_rows = quick ? 16 : 128;  // 128 x 50304 f32 logits: 26 MB
  s.optimizer_vocab = quick ? 4096 : 8192;
  s.optimizer_layers = quick ? 1 : 2;
  s.pool_input = quick ? Shape{2, 64, 56, 56} : Shape{8, 64, 112, 112};
  s.gemm_squares = quick ? std::vector<int64_t>{256, 512} : std::vector<int64_t>{256, 512, 1024, 2048};
  s.mlp_tokens = quick ? 256 : 2048;
  s.gemm_dtypes = {DType::f32};
  s.conv_layers = {
      {2, 64, 56, 56, 64, 3, 1, 1},
      {2, 128, 28, 28, 128, 3, 1, 1},
      {2, 256, 14, 14, 256, 3, 1, 1},
      {2, 3, 224, 224, 64, 7, 2, 3},
  };
  if (quick) {
    s.conv_layers.resize(2);
    for (ConvLayer& l : s.conv_layers) l.n = 1;
  }
  s.conv_dtypes = {DType::f32};
  s.attention_shapes = {{1, 4, quick ? 128 : 512, 64}};
  s.attention_dtypes = {DType::f32};
  return s;
}

}  // namespace

Sizes sizes_for(Device device, bool quick) { return device.is_cpu() ? cpu_sizes(quick) : gpu_sizes(quick); }

}  // namespace brigade::bench
