// CUDA graphs (core/cuda_graph.h, autograd/graphed.h) against eager execution: a graphed
// forward+backward replayed between eager optimizer steps trains a GPT to the same bits as eager
// steps do; what a graph cannot replay correctly refuses to be captured, and the stream works on
// afterwards. Run by tests/gpu_main.cpp, which skips without a GPU.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "autograd/graphed.h"
#include "autograd/tape.h"
#include "core/cuda_graph.h"
#include "core/factory.h"
#include "core/rng.h"
#include "core/stream.h"
#include "kernels/ops.h"
#include "nn/gpt.h"
#include "optim/adamw.h"

using namespace brigade;
using Catch::Contains;

namespace {

const Device kGpu = Device::cuda(0);

nn::GPTConfig gpt(std::optional<DType> compute, double dropout = 0) {
  nn::GPTConfig c;
  c.vocab_size = 29;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 1;  // head dim 64: bf16 takes the tensor-core attention
  c.n_embd = 64;
  c.seed = 5;
  c.device = kGpu;
  c.compute_dtype = compute;
  c.dropout = dropout;
  return c;
}

Tensor tokens(uint64_t seed, int64_t vocab) {
  Generator gen(seed);
  return ops::to_dtype(uniform({2, 16}, 0.0, double(vocab) - 1e-9, DType::f64, Device::cpu(), &gen), DType::i64)
      .to(kGpu);
}

std::vector<double> bits(const Tensor& t) { return t.to(Device::cpu()).to_vector(); }

}  // namespace

TEST_CASE("gpu CUDA graph: graphed forward+backward between eager AdamW steps trains a GPT to eager's bits",
          "[gpu][graphs]") {
  const std::optional<DType> compute = GENERATE(std::optional<DType>(), std::optional<DType>(DType::bf16));
  INFO((compute ? "bf16 compute" : "f32"));
  constexpr int kSteps = 4;
  const int64_t vocab = gpt(compute).vocab_size;

  // Eager: every step records a tape, runs backward and AdamW.
  nn::GPT eager(gpt(compute));
  optim::AdamW eager_opt(eager.named_parameters(), optim::AdamWOptions{.lr = 1e-2});
  std::vector<double> eager_losses;
  for (int s = 0; s < kSteps; ++s) {
    eager_opt.zero_grad();
    Tape tape;
    const Tensor loss = tape.record([&] { return eager.loss(tokens(100 + s, vocab), tokens(200 + s, vocab)); });
    tape.backward(loss);
    eager_opt.step();
    eager_losses.push_back(loss.item());
  }

  // Graphed: step 0 eager (warm-up: AdamW state, cuBLAS), then replays with new data copied in place.
  nn::GPT model(gpt(compute));
  optim::AdamW opt(model.named_parameters(), optim::AdamWOptions{.lr = 1e-2});
  const Tensor idx = tokens(100, vocab), targets = tokens(200, vocab);
  std::vector<double> losses;
  {
    opt.zero_grad();
    Tape tape;
    const Tensor loss = tape.record([&] { return model.loss(idx, targets); });
    tape.backward(loss);
    opt.step();
    losses.push_back(loss.item());
  }
  GraphedBackward graphed(model.parameters(), [&] { return model.loss(idx, targets); });
  for (int s = 1; s < kSteps; ++s) {
    ops::copy_(idx, tokens(100 + s, vocab));
    ops::copy_(targets, tokens(200 + s, vocab));
    const Tensor loss = graphed.run();
    opt.step();
    losses.push_back(loss.item());
  }
  CHECK(graphed.graph().operations() > 50);  // kernels and library calls, recorded once
  CHECK(graphed.graph().pool_bytes() > 0);
  CHECK(losses == eager_losses);
  const auto want = eager.state_dict();
  for (const auto& [name, t] : model.state_dict()) {
    INFO(name);
    CHECK(bits(t) == bits(want.at(name)));
  }

  // The gradients belong to the graph: replacing one is caught before the next replay.
  opt.zero_grad();
  CHECK_THROWS_WITH(graphed.run(), Contains("is no longer the tensor the graph writes"));
}

TEST_CASE("gpu CUDA graph: a replay reads its inputs and writes its outputs in place, ordered with the caller",
          "[gpu][graphs]") {
  const Tensor a = full({1000}, 1.0, DType::f32, kGpu), b = full({1000}, 2.0, DType::f32, kGpu);
  Tensor out;
  CudaGraph graph;
  CHECK_FALSE(is_capturing(kGpu));
  graph.capture(kGpu, [&] {
    CHECK(is_capturing(kGpu));
    out = ops::binary(ops::BinaryOp::mul, ops::binary(ops::BinaryOp::add, a, b), b);  // (a + b) * b
  });
  CHECK_FALSE(is_capturing(kGpu));
  CHECK(graph.operations() == 2);
  for (double x : {3.0, -1.5}) {
    ops::copy_(a, full({1000}, x, DType::f32, kGpu));  // on the caller's stream, before the replay
    graph.replay();
    const std::vector<double> got = bits(out);  // read on the caller's stream, after it
    CHECK(got.front() == (x + 2) * 2);
    CHECK(got.back() == (x + 2) * 2);
  }
  CHECK_THROWS_WITH(graph.capture(kGpu, [] {}), Contains("already captured"));
  CudaGraph empty;
  CHECK_THROWS_WITH(empty.replay(), Contains("nothing was captured"));
}

TEST_CASE("gpu CUDA graph: what a replay would get wrong refuses to be captured, and the stream works on",
          "[gpu][graphs]") {
  nn::GPT model(gpt(std::nullopt));
  const Tensor idx = tokens(1, 29), targets = tokens(2, 29);
  const double before = model.loss(idx, targets).item();
  optim::AdamW opt(model.named_parameters(), optim::AdamWOptions{});
  CudaGraph graph;
  SECTION("reading a value on the host") {
    CHECK_THROWS_WITH(graph.capture(kGpu, [&] { (void)model.loss(idx, targets).item(); }),
                      Contains("a copy to the CPU: cannot be recorded in a CUDA graph"));
  }
  SECTION("an optimizer step") {
    {
      Tape tape;
      tape.backward(tape.record([&] { return model.loss(idx, targets); }));
    }
    CHECK_THROWS_WITH(graph.capture(kGpu, [&] { opt.step(); }), Contains("an optimizer step cannot be recorded"));
    opt.zero_grad();
  }
  SECTION("random numbers") {
    nn::GPT dropping(gpt(std::nullopt, 0.1));
    (void)dropping.loss(idx, targets);  // warm-up: what the model makes lazily exists before the capture
    Tape tape;
    CHECK_THROWS_WITH(graph.capture(kGpu, [&] { (void)tape.record([&] { return dropping.loss(idx, targets); }); }),
                      Contains("every replay would repeat the captured mask"));
  }
  SECTION("a copy from the CPU") {
    CHECK_THROWS_WITH(graph.capture(kGpu, [&] { (void)tokens(3, 29); }),
                      Contains("a copy from the CPU: cannot be recorded in a CUDA graph"));
  }
  CHECK_FALSE(graph.captured());
  CHECK_FALSE(is_capturing(kGpu));
  CHECK(model.loss(idx, targets).item() == before);
}

TEST_CASE("gpu CUDA graph: cross entropy's mean divides by each replay's own count of targets",
          "[gpu][graphs]") {
  Generator gen(7);
  const Tensor logits = uniform({6, 5}, -2.0, 2.0, DType::f32, Device::cpu(), &gen).to(kGpu);
  const Tensor targets = from_vector({0, 1, 2, 3, 4, 0}, {6}, DType::i64, kGpu);
  const Tensor grad_loss = full({}, 1.0, DType::f32, kGpu);
  (void)ops::cross_entropy(logits, targets, -1, Reduction::mean);  // warm-up
  Tensor loss, grad;
  CudaGraph graph;
  graph.capture(kGpu, [&] {
    const ops::CrossEntropyOutput out = ops::cross_entropy(logits, targets, -1, Reduction::mean);
    CHECK(out.count == -1);  // only the device knows it here
    loss = out.loss;
    grad = ops::cross_entropy_backward(grad_loss, logits, targets, out, -1, Reduction::mean);
  });
  // Each batch ignores a different number of targets (all of them, last): the mean's divisor moves.
  for (const std::vector<double>& t : {std::vector<double>{0, -1, 2, -1, 4, -1}, std::vector<double>{1, 1, 1, 1, 1, 1},
                                       std::vector<double>{-1, -1, -1, -1, -1, 3}, std::vector<double>(6, -1)}) {
    ops::copy_(targets, from_vector(t, {6}, DType::i64, kGpu));
    graph.replay();
    const Tensor eager_targets = from_vector(t, {6}, DType::i64, kGpu);
    const ops::CrossEntropyOutput want = ops::cross_entropy(logits, eager_targets, -1, Reduction::mean);
    const Tensor want_grad = ops::cross_entropy_backward(grad_loss, logits, eager_targets, want, -1, Reduction::mean);
    CHECK(bits(loss) == bits(want.loss));
    CHECK(bits(grad) == bits(want_grad));
  }
#if BRIGADE_CUDA_EMULATOR
  // A bad target cannot be reported by the host during a replay: the GPU stops instead. (Emulator
  // only: on a GPU a trap leaves the process's CUDA context unusable, as a device-side assert does.)
  ops::copy_(targets, from_vector({0, 1, 9, 3, 4, 0}, {6}, DType::i64, kGpu));
  graph.replay();
  CHECK_THROWS_WITH(device_synchronize(kGpu), Contains("__trap"));
#endif
}
