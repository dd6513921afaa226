// The shapes and dtypes each benchmark group measures, for a device and a run length. One table per
// device, so the groups (memory.cpp, gemm.cpp, conv.cpp, attention.cpp) are written once for both:
//  - a GPU: tensors of hundreds of MB (several times its 50-60 MB L2), GEMMs up to 8192^3, bf16 and f32;
//  - the CPU: tensors of a few to tens of MB, GEMMs up to 2048^3, f32. The CPU computes bf16 through
//    f32 copies (kernels/ops.h), so bf16 is measured only for the elementwise group, where the
//    conversions are the point and cheap to run; its GB/s count bf16 bytes, so they read low.
#pragma once

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace brigade::bench {

// One convolution layer: input [n, c, h, w], `o` output channels, a square kernel.
struct ConvLayer {
  int64_t n, c, h, w, o, kernel, stride, padding;
};

// One attention problem: q, k and v of [batch, heads, tokens, head_dim] (causal, Tq = Tk).
struct AttentionShape {
  int64_t batch, heads, tokens, head_dim;
};

struct Sizes {
  // memory.cpp
  int64_t elements = 0;                    // per tensor in the elementwise, reduce, softmax, norm rows
  std::vector<DType> elementwise_dtypes;   // the elementwise and copy rows
  std::vector<DType> memory_dtypes;        // every other memory-bound group (a subset of the above)
  int64_t vocab = 0;                       // embedding and cross-entropy rows
  int64_t embedding_tokens = 0;
  int64_t loss_rows = 0;
  int64_t optimizer_vocab = 0;             // AdamW over a GPT-2-small-shaped parameter list of
  int optimizer_layers = 0;                //   this vocabulary and this many blocks
  Shape pool_input;                        // [n, c, h, w]
  // gemm.cpp
  std::vector<int64_t> gemm_squares;       // n^3 GEMMs
  int64_t mlp_tokens = 0;                  // the MLP up-projection: [tokens, 768] @ [768, 3072]
  std::vector<DType> gemm_dtypes;
  // conv.cpp
  std::vector<ConvLayer> conv_layers;
  std::vector<DType> conv_dtypes;
  // attention.cpp
  std::vector<AttentionShape> attention_shapes;
  std::vector<DType> attention_dtypes;
};

Sizes sizes_for(Device device, bool quick);

}  // namespace brigade::bench
