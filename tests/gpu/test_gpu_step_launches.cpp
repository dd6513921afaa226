// Launches per GPT training step, counted by the GPU emulator (emulator/launch_counts.h), which sees
// every kernel, library call and copy the host issues: a bf16 GPT step (zero_grad, forward and loss,
// backward, global-norm clipping, AdamW) must stay within a budget derived from the model — so many
// launches per transformer block, plus a constant — and the optimizer and the clipping must not cost
// a launch per parameter; and the whole step captured as one CUDA graph (optim/captured_step.h)
// costs the host two launches. Only in emulator builds: a GPU build has no counter.
#include <catch2/catch.hpp>

#include <cstdint>
#include <sstream>
#include <string>

#include "autograd/tape.h"
#include "bench_step/command.h"
#include "core/json.h"
#include "core/read_file.h"
#include "core/factory.h"
#include "core/rng.h"
#include "core/stream.h"
#include "emulator/launch_counts.h"
#include "kernels/ops.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "optim/captured_step.h"
#include "optim/clip_grad.h"
#include "temp_dir.h"
#include "tiny_gpt2.h"

using namespace brigade;

namespace {

const Device kGpu = Device::cuda(0);

// What one phase of a step issued.
emu::LaunchCounts counted(const std::function<void()>& phase) {
  emu::reset_launch_counts();
  phase();
  return emu::launch_counts();
}

// The waits of one read of a GPU scalar (item()): a copy to pinned memory and the wait for it.
uint64_t one_read_syncs() {
  const Tensor x = zeros({}, DType::f64, kGpu);
  device_synchronize(kGpu);
  return counted([&] { (void)x.item(); }).host_syncs;
}

std::string by_name(const emu::LaunchCounts& c) {
  std::ostringstream s;
  for (const auto& [name, n] : c.by_name) s << "  " << n << " " << name << "\n";
  for (const auto& [name, n] : c.syncs_by_call) s << "  sync " << n << " " << name << "\n";
  return s.str();
}

// The launches of each phase of one training step, after a warm-up step (optimizer state, library
// handles and lazily loaded kernels exist by then, as in every later step).
struct StepLaunches {
  emu::LaunchCounts zero, forward, backward, clip, optimizer;
  size_t parameters = 0;
};

StepLaunches count_step(int64_t layers) {
  nn::GPT model(test::tiny_gpt2(layers, kGpu));
  optim::AdamW opt(model.named_parameters(), optim::AdamWOptions{.lr = 1e-3});
  const Tensor idx = test::tiny_tokens(1, kGpu), targets = test::tiny_tokens(2, kGpu);
  StepLaunches s;
  s.parameters = model.parameters().size();
  for (int step = 0; step < 2; ++step) {
    Tape tape;
    Tensor loss;
    s.zero = counted([&] { opt.zero_grad(); });
    s.forward = counted([&] { loss = tape.record([&] { return model.loss(idx, targets); }); });
    s.backward = counted([&] { tape.backward(loss); });
    s.clip = counted([&] { (void)optim::clip_grad_norm(model.parameters(), 0.5); });
    s.optimizer = counted([&] { opt.step(); });
    device_synchronize(kGpu);
  }
  return s;
}

}  // namespace

TEST_CASE("gpu step launches: the emulator counts every launch, library call, copy and host wait",
          "[gpu][launches]") {
  const Tensor x = ones({1000}, DType::f32, kGpu);
  const emu::LaunchCounts c = counted([&] {
    ops::scale_(x, 2.0);                               // one elementwise kernel
    const Tensor y = ops::binary(ops::BinaryOp::add, x, x);  // another
    const Tensor z = ops::matmul(ones({4, 8}, DType::f32, kGpu), ones({8, 2}, DType::f32, kGpu));
    (void)z.to(Device::cpu());                         // a copy the host waits for
    device_synchronize(kGpu);
  });
  INFO(by_name(c));
  // Independent of the library's choice of kernels: ones() fills, scale_ and add are one kernel each,
  // the matmul at least one launch, the copy to the host one copy and one wait, the synchronize another.
  CHECK(c.copies >= 1);
  CHECK(c.syncs_by_call.at("cudaDeviceSynchronize") == 1);
  CHECK(c.host_syncs >= 2);
  CHECK(c.kernels + c.library_calls >= 5);
  CHECK(c.launches() == c.kernels + c.library_calls + c.communication + c.copies + c.graph_launches);
  uint64_t named = 0;
  for (const auto& [name, n] : c.by_name) named += n;
  CHECK(named == c.launches());
  // A name is the kernel's, without its launch configuration.
  CHECK(emu::launch_name("scale_kernel<float><<<(4,1,1), (256,1,1), 0>>>") == "scale_kernel<float>");
  CHECK(emu::launch_name("cublasGemmEx(T, N, m=4)") == "cublasGemmEx");
  CHECK(emu::launch_name("cudaMemcpyAsync of 64 bytes") == "cudaMemcpyAsync");
}

TEST_CASE("gpu step launches: a bf16 GPT step costs a fixed number of launches per block, none per parameter",
          "[gpu][launches]") {
  const StepLaunches one = count_step(1), three = count_step(3);
  const auto total = [](const StepLaunches& s) {
    return s.zero.launches() + s.forward.launches() + s.backward.launches() + s.clip.launches() +
           s.optimizer.launches();
  };
  INFO("1 block: forward " << one.forward.launches() << ", backward " << one.backward.launches() << ", clip "
                           << one.clip.launches() << ", AdamW " << one.optimizer.launches() << "\n"
                           << "3 blocks: forward " << three.forward.launches() << ", backward "
                           << three.backward.launches() << ", clip " << three.clip.launches() << ", AdamW "
                           << three.optimizer.launches() << "\nforward:\n" << by_name(three.forward)
                           << "backward:\n" << by_name(three.backward) << "clip:\n" << by_name(three.clip)
                           << "AdamW:\n" << by_name(three.optimizer));

  // zero_grad drops gradients: nothing to launch.
  CHECK(three.zero.launches() == 0);
  // The optimizer: one multi-tensor launch per table of up to 48 tensors (kernels/cuda/adamw.cu),
  // whatever the number of parameters. The clipping: per table the squares and the scaling, then
  // the sums added up and the norm read back (one copy, and the waits one item() costs). A launch
  // per parameter would be 3 * 12 + 4 = 40 for 3 blocks (before: 4 or 5 per parameter and a wait).
  const uint64_t tables = (three.parameters + 47) / 48;
  CHECK(three.optimizer.launches() <= tables);
  CHECK(three.optimizer.host_syncs == 0);
  CHECK(three.clip.launches() <= 2 * tables + 2);
  CHECK(three.clip.host_syncs <= one_read_syncs());

  // Forward and backward: per block at most what a block's ops cost today — 12 parameter casts to
  // bf16, 4 GEMMs and their 4 bias/activation epilogues, 2 norms, attention, the residual adds — and
  // a constant for the embedding, the head and the loss. A change that adds launches to every block,
  // or per parameter, fails here; one that removes some should lower these numbers.
  constexpr uint64_t kForwardPerBlock = 24, kBackwardPerBlock = 56, kConstant = 38;
  const uint64_t forward_slope = (three.forward.launches() - one.forward.launches()) / 2;
  const uint64_t backward_slope = (three.backward.launches() - one.backward.launches()) / 2;
  CHECK(forward_slope <= kForwardPerBlock);
  CHECK(backward_slope <= kBackwardPerBlock);
  CHECK(three.forward.launches() + three.backward.launches() <= 3 * (kForwardPerBlock + kBackwardPerBlock) + kConstant);
  CHECK(total(three) <= 3 * (kForwardPerBlock + kBackwardPerBlock) + kConstant + 3 * tables + 2);
  // The step issues work without waiting for it: the only wait is the clipping's read of the norm.
  CHECK(three.forward.host_syncs + three.backward.host_syncs == 0);
}

TEST_CASE("gpu step launches: a step captured as one CUDA graph costs the host a replay and a copy",
          "[gpu][launches][graphs]") {
  nn::GPT model(test::tiny_gpt2(2, kGpu));
  optim::AdamW opt(model.named_parameters(), optim::AdamWOptions{.lr = 1e-3});
  opt.set_capturable(true);
  const Tensor idx = test::tiny_tokens(1, kGpu), targets = test::tiny_tokens(2, kGpu);
  const auto step = [&] {
    opt.zero_grad();
    Tape tape;
    const Tensor loss = tape.record([&] { return model.loss(idx, targets); });
    tape.backward(loss);
    (void)optim::clip_grad_norm_on_device(opt.parameters(), 0.5);
    opt.step();
    return loss.detach();
  };
  (void)step();
  device_synchronize(kGpu);
  // The eager step of the capturable optimizer, as the graph records it.
  const emu::LaunchCounts eager = counted([&] { (void)step(); });
  optim::CapturedStep captured(opt, step);
  (void)captured.run();
  const emu::LaunchCounts replay = counted([&] { (void)captured.run(); });
  INFO("eager:\n" << by_name(eager) << "replay:\n" << by_name(replay));
  CHECK(replay.graph_launches == 1);
  CHECK(replay.copies == 1);  // AdamW's coefficients, staged for the replay
  CHECK(replay.launches() == 2);
  CHECK(replay.host_syncs == 0);
  // The graph holds what the eager step issued, less the staging copy that stays outside it, and a
  // few more: under capture the index checks run on the device (docs/cuda.md, CUDA graphs).
  CHECK(captured.graph().operations() >= eager.launches() - 1);
  CHECK(eager.launches() > 100);
}

TEST_CASE("gpu step launches: brigade bench step reports the count, eager and as a graph", "[gpu][launches][bench]") {
  const test::TempDir dir;
  const auto run = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"--device", "cuda", "--precision", "bf16", "--layers", "2", "--embd", "64",
                                      "--heads", "1", "--seq", "16", "--batch", "2", "--vocab", "32",
                                      "--steps", "2", "--warmup", "1", "--clip", "1", "--json", dir.file("step.json")};
    args.insert(args.end(), extra.begin(), extra.end());
    std::ostringstream out, err;
    REQUIRE(bench_step::bench_step_command(args, out, err) == 0);
    INFO(out.str() + err.str());
    CHECK(out.str().find("launches per step: ") != std::string::npos);
    return parse_json(read_file(dir.file("step.json"), "test"));
  };
  const Json eager = run({});
  const Json graph = run({"--cuda-graph"});
  // Eager: what the test above counts phase by phase for 2 blocks, and no wait but the bench's own
  // synchronize per step. As a graph: the replay and AdamW's staged coefficients.
  const Json& e = eager["launches_per_step"];
  CHECK(e["total"].as_number() == e["kernels"].as_number() + e["library_calls"].as_number() + e["copies"].as_number());
  CHECK(e["total"].as_number() > 100);
  CHECK(e["host_syncs"].as_number() == 1);
  CHECK(e["by_name"]["adamw_multi_tensor_kernel<P, S>"].as_number() == 1);
  CHECK(graph["launches_per_step"]["total"].as_number() == 2);
  CHECK(graph["launches_per_step"]["graph_launches"].as_number() == 1);
  CHECK(graph["graph_operations"].as_number() >= e["total"].as_number() - 1);
}
