// Memory-bound kernels: everything in a training step except the GEMMs. Each reads and writes its
// tensors about once, so the fair yardstick is bytes moved per second against the copy bandwidth;
// "bytes" below is the minimum traffic the op needs (each input read once, each output written once).
// The same rows on a GPU and on the CPU, at the sizes of sizes.h.
#include <algorithm>

#include "bench_kernels/benchmarks.h"
#include "core/factory.h"
#include "core/rng.h"
#include "kernels/ops.h"

namespace brigade::bench {
namespace {

using ops::BinaryOp;
using ops::UnaryOp;

void elementwise(Session& s, DType t, int64_t n) {
  const Device dev = s.device();
  const double e = double(dtype_size(t));
  const std::string dt = dtype_name(t), flat = dims_text({n});
  const int64_t cols = 4096, rows = n / cols;
  const std::string matrix = dims_text({rows, cols});
  const Tensor a = randn({n}, t, dev), b = randn({n}, t, dev);
  const Tensor x = a.view({rows, cols}), bias = randn({cols}, t, dev);

  s.bandwidth({"elementwise", "clone", flat, dt}, 2 * n * e, [&] { ops::clone(a); });
  s.bandwidth({"elementwise", "add", flat, dt}, 3 * n * e, [&] { ops::binary(BinaryOp::add, a, b); });
  s.bandwidth({"elementwise", "add bias (broadcast row)", matrix, dt}, 2 * n * e,
              [&] { ops::binary(BinaryOp::add, x, bias); });
  s.bandwidth({"elementwise", "mul", flat, dt}, 3 * n * e, [&] { ops::binary(BinaryOp::mul, a, b); });
  s.bandwidth({"elementwise", "scale_shift", flat, dt}, 2 * n * e, [&] { ops::scale_shift(a, 0.5, 1.0); });
  const Tensor y = ops::unary(UnaryOp::gelu, a);
  s.bandwidth({"elementwise", "gelu", flat, dt}, 2 * n * e, [&] { ops::unary(UnaryOp::gelu, a); });
  s.bandwidth({"elementwise", "gelu backward", flat, dt}, 3 * n * e,
              [&] { ops::unary_backward(UnaryOp::gelu, b, a, y); });
  s.bandwidth({"elementwise", "add_ (in place)", flat, dt}, 3 * n * e, [&] { ops::add_(a, b, 1e-3); });
  const DType other = t == DType::f32 ? DType::bf16 : DType::f32;
  s.bandwidth({"copy", std::string("to ") + dtype_name(other), flat, dt}, n * (e + double(dtype_size(other))),
              [&] { ops::to_dtype(a, other); });
  const Tensor square = a.view({8192, n / 8192});
  s.bandwidth({"copy", "transpose (contiguous of a transposed view)", dims_text({8192, n / 8192}), dt}, 2 * n * e,
              [&] { ops::contiguous(square.transpose(0, 1)); });
  s.bandwidth({"random", "randn", flat, dt}, n * e, [&] { randn({n}, t, dev); });
  s.bandwidth({"random", "dropout p=0.1", flat, dt}, 2 * n * e, [&] { ops::dropout(a, 0.1, 1234, 0); });
}

void reductions(Session& s, DType t, int64_t n) {
  const Device dev = s.device();
  const double e = double(dtype_size(t));
  const std::string dt = dtype_name(t);
  const int64_t cols = 4096, rows = n / cols;
  const std::string matrix = dims_text({rows, cols});
  const Tensor x = randn({rows, cols}, t, dev), g = randn({rows, cols}, t, dev);

  s.bandwidth({"reduce", "sum all", matrix, dt}, n * e, [&] { ops::sum(x, {}, false); });
  s.bandwidth({"reduce", "sum over rows (dim 1)", matrix, dt}, n * e, [&] { ops::sum(x, {1}, false); });
  s.bandwidth({"reduce", "sum over columns (dim 0)", matrix, dt}, n * e, [&] { ops::sum(x, {0}, false); });
  s.bandwidth({"reduce", "max over rows with indices", matrix, dt}, n * e, [&] { ops::max(x, 1, false); });

  // Attention-shaped softmax: rows of 2048 (one row per query).
  const Tensor scores = x.view({n / 2048, 2048}), gs = g.view({n / 2048, 2048});
  const Tensor probs = ops::softmax(scores, -1);
  const std::string att = dims_text({n / 2048, 2048});
  s.bandwidth({"softmax", "softmax", att, dt}, 2 * n * e, [&] { ops::softmax(scores, -1); });
  s.bandwidth({"softmax", "softmax backward", att, dt}, 3 * n * e, [&] { ops::softmax_backward(gs, probs, -1); });
  s.bandwidth({"softmax", "log_softmax", att, dt}, 2 * n * e, [&] { ops::log_softmax(scores, -1); });
  const Tensor log_probs = ops::log_softmax(scores, -1);
  s.bandwidth({"softmax", "log_softmax backward", att, dt}, 3 * n * e,
              [&] { ops::log_softmax_backward(gs, log_probs, -1); });
  // GPT-2's attention rows (T = 1024): a warp per row instead of a block.
  const Tensor short_scores = x.view({n / 1024, 1024});
  s.bandwidth({"softmax", "softmax (rows of 1024: a warp each)", dims_text({n / 1024, 1024}), dt}, 2 * n * e,
              [&] { ops::softmax(short_scores, -1); });

  const Tensor w = randn({cols}, t, dev), bias = randn({cols}, t, dev);
  const ops::NormOutput ln = ops::layer_norm(x, w, bias, 1e-5);
  s.bandwidth({"norm", "layer_norm", matrix, dt}, 2 * n * e, [&] { ops::layer_norm(x, w, bias, 1e-5); });
  s.bandwidth({"norm", "layer_norm backward input", matrix, dt}, 3 * n * e,
              [&] { ops::layer_norm_backward_input(g, x, w, ln); });
  s.bandwidth({"norm", "layer_norm backward weight+bias", matrix, dt}, 2 * n * e,
              [&] { ops::layer_norm_backward_params(g, x, w, bias, ln); });
  const ops::NormOutput rms = ops::rms_norm(x, w, 1e-6);
  s.bandwidth({"norm", "rms_norm", matrix, dt}, 2 * n * e, [&] { ops::rms_norm(x, w, 1e-6); });
  s.bandwidth({"norm", "rms_norm backward input", matrix, dt}, 3 * n * e,
              [&] { ops::rms_norm_backward_input(g, x, w, rms); });
  s.bandwidth({"norm", "rms_norm backward weight", matrix, dt}, 2 * n * e,
              [&] { ops::rms_norm_backward_weight(g, x, rms); });

  // GPT-2's width (768: a warp per row), and the residual add fused into the norm (reads x and the
  // residual, writes the sum and y).
  const int64_t width = 768, narrow_rows = n / width;
  const std::string gpt2 = dims_text({narrow_rows, width});
  const Tensor xn = x.view({-1}).narrow(0, 0, narrow_rows * width).view({narrow_rows, width});
  const Tensor gn = g.view({-1}).narrow(0, 0, narrow_rows * width).view({narrow_rows, width});
  const Tensor wn = randn({width}, t, dev), bn = randn({width}, t, dev);
  const ops::NormOutput lnn = ops::layer_norm(xn, wn, bn, 1e-5);
  s.bandwidth({"norm", "layer_norm", gpt2, dt}, 2 * double(narrow_rows * width) * e,
              [&] { ops::layer_norm(xn, wn, bn, 1e-5); });
  s.bandwidth({"norm", "layer_norm backward input", gpt2, dt}, 3 * double(narrow_rows * width) * e,
              [&] { ops::layer_norm_backward_input(gn, xn, wn, lnn); });
  s.bandwidth({"norm", "add_layer_norm (residual fused)", gpt2, dt}, 4 * double(narrow_rows * width) * e,
              [&] { ops::add_layer_norm(xn, gn, wn, bn, 1e-5); });
}

// The ends of a language model: the embedding lookup and the loss over a GPT-2-sized vocabulary.
void model_ends(Session& s, const Sizes& sizes, DType t) {
  const Device dev = s.device();
  const double e = double(dtype_size(t));
  const std::string dt = dtype_name(t);
  const int64_t vocab = sizes.vocab, dim = 768, tokens = sizes.embedding_tokens;

  const Tensor table = randn({vocab, dim}, t, dev);
  const Tensor idx = ops::to_dtype(uniform({tokens}, 0, double(vocab), DType::f64, dev), DType::i64);
  const Tensor grad_rows = randn({tokens, dim}, t, dev);
  s.bandwidth({"embedding", "embedding", dims_text({vocab, dim}) + " [" + std::to_string(tokens) + "]", dt},
              2.0 * double(tokens * dim) * e, [&] { ops::embedding(table, idx); });
  s.bandwidth({"embedding", "embedding backward", dims_text({vocab, dim}) + " [" + std::to_string(tokens) + "]", dt},
              double(tokens * dim + vocab * dim) * e, [&] { ops::embedding_backward(grad_rows, idx, vocab); });

  const int64_t rows = sizes.loss_rows;
  const Tensor logits = randn({rows, vocab}, t, dev);
  const Tensor targets = ops::to_dtype(uniform({rows}, 0, double(vocab), DType::f64, dev), DType::i64);
  const ops::CrossEntropyOutput ce = ops::cross_entropy(logits, targets, -100, Reduction::mean);
  const Tensor one = ones({}, t, dev);
  const double logit_bytes = double(rows * vocab) * e;
  s.bandwidth({"loss", "cross_entropy", dims_text({rows, vocab}), dt}, logit_bytes,
              [&] { ops::cross_entropy(logits, targets, -100, Reduction::mean); });
  s.bandwidth({"loss", "cross_entropy backward", dims_text({rows, vocab}), dt}, 2 * logit_bytes,
              [&] { ops::cross_entropy_backward(one, logits, targets, ce, -100, Reduction::mean); });
  // An odd vocabulary (GPT-2's unpadded 50257, or the CPU's smaller one less 47): each row starts at
  // its own phase, so the vector path needs its scalar head and tail.
  const int64_t odd = vocab - 47;
  const Tensor odd_logits = logits.view({-1}).narrow(0, 0, rows * odd).view({rows, odd});
  const Tensor odd_targets = ops::to_dtype(uniform({rows}, 0, double(odd), DType::f64, dev), DType::i64);
  const ops::CrossEntropyOutput odd_ce = ops::cross_entropy(odd_logits, odd_targets, -100, Reduction::mean);
  const double odd_bytes = double(rows * odd) * e;
  s.bandwidth({"loss", "cross_entropy", dims_text({rows, odd}), dt}, odd_bytes,
              [&] { ops::cross_entropy(odd_logits, odd_targets, -100, Reduction::mean); });
  s.bandwidth({"loss", "cross_entropy backward", dims_text({rows, odd}), dt}, 2 * odd_bytes,
              [&] { ops::cross_entropy_backward(one, odd_logits, odd_targets, odd_ce, -100, Reduction::mean); });
}

// AdamW over GPT-2 small's parameter list (on a GPU: 124M parameters in 148 tensors; one launch for
// all), or the same list with fewer blocks and a smaller vocabulary (the CPU).
void optimizer(Session& s, const Sizes& sizes, DType param_dtype) {
  const Device dev = s.device();
  std::vector<Shape> shapes = {{sizes.optimizer_vocab, 768}, {1024, 768}};  // token and position embeddings
  const std::vector<Shape> block = {{768}, {768},  {768, 2304}, {2304}, {768, 768}, {768},
                                    {768}, {768},  {768, 3072}, {3072}, {3072, 768}, {768}};
  for (int layer = 0; layer < sizes.optimizer_layers; ++layer) shapes.insert(shapes.end(), block.begin(), block.end());
  shapes.push_back({768});  // the final layer norm's weight
  shapes.push_back({768});  // and bias
  std::vector<Tensor> p, g, m, v;
  int64_t total = 0;
  for (const Shape& shape : shapes) {
    p.push_back(randn(shape, param_dtype, dev));
    g.push_back(randn(shape, param_dtype, dev));
    m.push_back(zeros(shape, DType::f32, dev));
    v.push_back(zeros(shape, DType::f32, dev));
    total += shape_numel(shape);
  }
  // Per element: param read + written, grad read, both moments read + written (f32).
  const double pe = double(dtype_size(param_dtype));
  const double bytes = double(total) * (3 * pe + 16);
  ops::AdamWParams hp;
  s.bandwidth({"optimizer", "adamw_step_ (" + std::to_string(p.size()) + " tensors)", std::to_string(total) + " params",
               dtype_name(param_dtype)},
              bytes, [&] { ops::adamw_step_(p, g, m, v, hp); });
}

void pooling(Session& s, const Sizes& sizes, DType t) {
  const Device dev = s.device();
  const double e = double(dtype_size(t));
  const Tensor x = randn(sizes.pool_input, t, dev);
  const int64_t in = x.numel(), out = in / 4;
  const std::string shape = dims_text(sizes.pool_input);
  s.bandwidth({"pool", "max_pool2d 2x2 with indices", shape, dtype_name(t)}, double(in) * e + double(out) * (e + 8),
              [&] { ops::max_pool2d(x, {2, 2, 0}); });
  s.bandwidth({"pool", "avg_pool2d 2x2", shape, dtype_name(t)}, double(in + out) * e,
              [&] { ops::avg_pool2d(x, {2, 2, 0}); });
}

}  // namespace

void run_memory_benchmarks(Session& s, const Sizes& sizes) {
  const int64_t n = sizes.elements;
  for (DType t : sizes.elementwise_dtypes) {
    elementwise(s, t, n);
    if (std::find(sizes.memory_dtypes.begin(), sizes.memory_dtypes.end(), t) == sizes.memory_dtypes.end()) continue;
    reductions(s, t, n);
    model_ends(s, sizes, t);
    optimizer(s, sizes, t == DType::f32 ? DType::f32 : DType::bf16);
    pooling(s, sizes, t);
  }
}

}  // namespace brigade::bench
