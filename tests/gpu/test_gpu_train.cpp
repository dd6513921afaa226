// The model, the pipeline and the trainer on a real GPU, against the CPU: the same seed gives the
// same weights; bf16 compute stays close to an f64 reference; a pipeline of rank threads, each on its
// own stream, gives one device's gradients; `brigade train --device cuda` learns. Run by
// tests/gpu_main.cpp, which skips without a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "comm/comm.h"
#include "comm/thread_ranks.h"
#include "core/factory.h"
#include "core/memory_limit.h"
#include "core/rng.h"
#include "core/stream.h"
#include "kernels/ops.h"
#include "nn/gpt.h"
#include "pipeline/gpt_stages.h"
#include "pipeline/runtime.h"
#include "pipeline/trace.h"
#include "data_prepare/command.h"  // tools/data_prepare/
#include "generate/command.h"      // tools/generate/
#include "temp_dir.h"
#include "text/tokenizer_files.h"
#include "text/train.h"
#include "train/command.h"  // tools/train/
#include "train/options.h"
#include "train/trainer.h"

using namespace brigade;
using namespace brigade::pipeline;
using Catch::Contains;

namespace {

const Device kGpu = Device::cuda(0);

nn::GPTConfig small_gpt(Device device, std::optional<DType> compute = std::nullopt) {
  nn::GPTConfig c{.vocab_size = 37, .block_size = 16, .n_layer = 2, .n_head = 4, .n_embd = 64, .compute_dtype = compute,
      .device = device, .seed = 11};
  return c;
}

Tensor token_ids(int64_t b, int64_t t, uint64_t seed, int64_t vocab) {
  Generator gen(seed);
  Tensor u = uniform({b, t}, 0.0, double(vocab) - 1e-9, DType::f64, Device::cpu(), &gen);
  return ops::to_dtype(u, DType::i64);  // truncation: ids in [0, vocab)
}

// Σ (got - want)² / Σ want², both read through the host in f64.
double nmse(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = got.to(Device::cpu()).to_vector(), w = want.to(Device::cpu()).to_vector();
  REQUIRE(g.size() == w.size());
  double err = 0, ref = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    REQUIRE(std::isfinite(g[i]));
    err += (g[i] - w[i]) * (g[i] - w[i]);
    ref += w[i] * w[i];
  }
  return ref > 0 ? err / ref : err;
}

struct Step {
  Tensor logits, loss;
  std::map<std::string, Tensor> grads;
};

Step forward_backward(nn::GPT& model, const Tensor& idx, const Tensor& targets) {
  Step s;
  Tape tape;
  {
    TapeGuard guard(tape);
    s.logits = model(idx.to(model.config().device));
    s.loss = nn::language_model_loss(s.logits, targets.to(model.config().device));
  }
  tape.backward(s.loss);
  for (auto& [name, p] : model.named_parameters()) s.grads[name] = p.grad();
  return s;
}

}  // namespace

TEST_CASE("gpu GPT: the same seed gives the CPU's weights, bit for bit", "[gpu][train]") {
  nn::GPT cpu(small_gpt(Device::cpu()));
  nn::GPT gpu(small_gpt(kGpu));
  for (const auto& [name, t] : cpu.state_dict()) {
    INFO(name);
    const Tensor g = gpu.state_dict().at(name);
    REQUIRE(g.device() == kGpu);
    REQUIRE(g.to(Device::cpu()).to_vector() == t.to_vector());
  }
}

TEST_CASE("gpu GPT: f32 and bf16 compute against an f64 CPU reference", "[gpu][train]") {
  nn::GPT reference(small_gpt(Device::cpu()));
  reference.to(DType::f64);
  const Tensor idx = token_ids(3, 16, 5, 37), targets = token_ids(3, 16, 6, 37);
  const Step want = forward_backward(reference, idx, targets);

  // f32 on the GPU (TF32 is off by default, so GEMMs are true f32).
  nn::GPT f32(small_gpt(kGpu));
  const Step got = forward_backward(f32, idx, targets);
  CHECK(nmse(got.logits, want.logits) < 1e-10);
  CHECK(std::abs(got.loss.to(Device::cpu()).item() - want.loss.item()) < 1e-5 * want.loss.item());
  for (auto& [name, g] : want.grads) {
    INFO(name);
    CHECK(nmse(got.grads.at(name), g) < 1e-8);
  }

  // bf16 compute, f32 master weights: the thresholds of tests/test_nn.cpp's CPU version.
  nn::GPT mixed(small_gpt(kGpu, DType::bf16));
  const Step m = forward_backward(mixed, idx, targets);
  REQUIRE(m.logits.dtype() == DType::bf16);
  REQUIRE(m.loss.dtype() == DType::f32);
  CHECK(nmse(m.logits, want.logits) < 1e-4);
  double err = 0, ref = 0;
  for (auto& [name, g] : want.grads) {
    INFO(name);
    const Tensor& mg = m.grads.at(name);
    REQUIRE(mg.dtype() == DType::f32);
    CHECK(nmse(mg, g) < 3e-2);
    const double e = nmse(mg, g);
    double r = 0;
    for (double v : g.to_vector()) r += v * v;
    err += e * r;
    ref += r;
  }
  CHECK(err / ref < 1e-3);
}

TEST_CASE("gpu GPT: fused attention gives the composition's outputs and gradients, dropout included",
          "[gpu][train][attention]") {
  // Head dim 64: bf16 compute takes the tensor-core kernels, f32 the generic ones.
  for (std::optional<DType> compute : {std::optional<DType>(), std::optional<DType>(DType::bf16)}) {
    INFO((compute ? "bf16" : "f32") << " compute");
    nn::GPTConfig c = small_gpt(kGpu, compute);
    c.n_embd = 128;
    c.n_head = 2;
    c.block_size = 20;
    c.dropout = 0.1;
    nn::GPT fused(c);
    c.fused_attention = false;
    nn::GPT composed(c);
    const Tensor idx = token_ids(2, 20, 7, 37), targets = token_ids(2, 20, 8, 37);
    manual_seed(99);  // both runs draw the same dropout counters
    const Step f = forward_backward(fused, idx, targets);
    manual_seed(99);
    const Step want = forward_backward(composed, idx, targets);
    const double logits_limit = compute ? 1e-4 : 1e-10, grad_limit = compute ? 3e-2 : 1e-8;
    CHECK(nmse(f.logits, want.logits) < logits_limit);
    for (auto& [name, g] : want.grads) {
      INFO(name);
      CHECK(nmse(f.grads.at(name), g) < grad_limit);
    }
  }
}

TEST_CASE("gpu pipeline: 4 rank threads, each on its own stream, give one device's gradients", "[gpu][pipeline]") {
  // The reference: the same micro-batches one after another on the GPU, each backward seeded 1/M.
  for (auto [kind, P, M, V] : {std::tuple{ScheduleKind::one_f_one_b, 4, 8, 1}, std::tuple{ScheduleKind::zb_h1, 4, 8, 1},
                               std::tuple{ScheduleKind::interleaved, 2, 4, 2}}) {
    for (DType compute : {DType::f32, DType::bf16}) {
      DYNAMIC_SECTION(schedule_name(kind) << " " << dtype_name(compute)) {
        const nn::GPTConfig config = small_gpt(kGpu, compute);
        std::vector<Tensor> inputs, targets;
        for (int m = 0; m < M; ++m) {
          inputs.push_back(token_ids(2, 16, 100 + uint64_t(m), 37).to(kGpu));
          targets.push_back(token_ids(2, 16, 200 + uint64_t(m), 37).to(kGpu));
        }
        nn::GPT one(config);
        double want_loss = 0;
        for (int m = 0; m < M; ++m) {
          Tape tape;
          Tensor loss;
          {
            TapeGuard guard(tape);
            loss = one.loss(inputs[size_t(m)], targets[size_t(m)]);
          }
          tape.backward({loss}, {full(loss.shape(), 1.0 / M, loss.dtype(), loss.device())});
          want_loss += loss.to(Device::cpu()).item() / M;
        }

        // The inputs were copied on this thread's stream; the rank threads read them on streams of
        // their own (non-blocking: no implicit ordering with this one), so wait for the copies.
        device_synchronize(kGpu);
        const Schedule schedule = make_schedule(kind, P, M, V);
        const Partition partition = partition_uniform(int64_t(config.n_layer) + 2, int64_t(P) * V);
        auto comms = comm::local_group(std::vector<Device>(size_t(P), kGpu));
        std::mutex mutex;
        std::map<std::string, Tensor> grads;
        double got_loss = 0;
        Trace trace;
        auto errors = test::run_ranks(comms, [&](comm::Communicator& comm) {
          Stream stream = Stream::create(kGpu);
          StreamGuard on_stream(stream);
          // Only this rank's layers (drawn by name: the whole model's values there).
          const std::shared_ptr<nn::GPT> mine_only = gpt_rank_model(config, partition, schedule.layout, comm.rank());
          nn::GPT& model = *mine_only;
          GptStages mine = gpt_stages(model, partition, schedule.layout, comm.rank());
          PipelineOptions options;
          options.ties = mine.ties;
          options.trace = true;
          PipelineGroups groups;
          groups.pipeline = &comm;
          Pipeline pipe(groups, schedule, mine.chunks, mine.loss, options);
          StepStats stats = pipe.forward_backward(inputs, targets);
          stream.synchronize();
          std::lock_guard<std::mutex> lock(mutex);
          if (comm.rank() == 0) {
            got_loss = stats.loss;
            trace = pipe.last_trace();
          }
          for (auto& [name, p] : model.named_parameters())
            if (p.grad().defined() && !grads.count(name)) grads[name] = p.grad().to(Device::cpu());
        });
        for (size_t r = 0; r < errors.size(); ++r) {
          INFO("rank " << r << ": " << errors[r]);
          REQUIRE(errors[r].empty());
        }
        // Same kernels, same order: equal up to the tied embedding's two-stage sum — and a GEMM
        // library may pick another algorithm on another stream, which moves bf16 results by an ulp
        // here and there (~4e-3 relative each): tolerances, not bitwise.
        CHECK(std::abs(got_loss - want_loss) < (compute == DType::f32 ? 1e-6 : 1e-3) * want_loss);
        for (auto& [name, p] : one.named_parameters()) {
          INFO(name);
          REQUIRE(grads.count(name));
          CHECK(nmse(grads.at(name), p.grad()) < (compute == DType::f32 ? 1e-10 : 1e-4));
        }
        // The trace, timed with CUDA events: every compute action of every rank, with a sane bubble.
        REQUIRE(trace.ranks == P);
        size_t computes = 0;
        for (const auto& e : trace.events) {
          REQUIRE(e.end >= e.start);
          computes += is_compute(e.action.kind) ? 1 : 0;
        }
        const size_t per_microbatch_stage = schedule.split_backward() ? 3 : 2;
        CHECK(computes == size_t(M) * size_t(P * V) * per_microbatch_stage);
        const double bubble = trace.measured_bubble();
        CHECK(bubble >= 0);
        CHECK(bubble < 1);
      }
    }
  }
}

TEST_CASE("gpu train: brigade train --device cuda learns in bf16 with f32 master weights", "[gpu][train]") {
  std::ostringstream out, err;
  const int status = train::train_command({"--device", "cuda", "--steps", "200", "--layers", "1", "--heads", "2",
                                           "--embd", "32", "--digits", "4", "--warmup", "5", "--log-every", "100",
                                           "--eval", "200", "--trace", "none", "--svg", "none"},
                                          out, err);
  INFO(out.str() << err.str());
  REQUIRE(status == 0);
  REQUIRE_THAT(out.str(), Contains(", cuda:0, bf16 compute with f32 master weights"));
  REQUIRE_THAT(out.str(), Contains("pipeline: 4 stages on 4 ranks (threads)"));
  // The CPU test's bar for the same model and steps (tests/test_train.cpp): ~85% of digits right.
  const std::string text = out.str();
  const size_t at = text.find("% of digits right");
  REQUIRE(at != std::string::npos);
  size_t begin = text.rfind(' ', at - 1);
  const double digits_right = std::stod(text.substr(begin + 1, at - begin - 1));
  CHECK(digits_right > 85);
}

TEST_CASE("gpu train --memory-limit: too little fails naming what the process holds; enough trains",
          "[gpu][train][memory]") {
  // The model (~15k parameters in blocks of 512 bytes) fits in 1 MiB; a step on 256 sequences, and
  // the GEMM's workspace on a real GPU, do not.
  const std::vector<std::string> tiny = {"--device", "cuda", "--stages", "0", "--steps", "2", "--layers", "1",
                                         "--heads", "2", "--embd", "32", "--digits", "4", "--batch", "256",
                                         "--eval", "10", "--trace", "none", "--svg", "none"};
  auto run = [&](const char* limit, std::string& text) {
    std::vector<std::string> args = tiny;
    args.insert(args.end(), {"--memory-limit", limit});
    std::ostringstream out, err;
    const int status = train::train_command(args, out, err);
    text = out.str() + err.str();
    return status;
  };
  std::string text;
  CHECK(run("1MiB", text) != 0);
  INFO(text);
  CHECK_THAT(text, Contains("out of memory on cuda:0: tried to allocate "));
  CHECK_THAT(text, Contains("that would pass this process's limit of 1.00 MiB (--memory-limit 1.00 MiB)"));
  CHECK_THAT(text, Contains("this process (the whole model on cuda:0): parameters "));
  CHECK_THAT(text, Contains("To fit, try: more pipeline stages (--stages)"));
  cuda_empty_cache();  // what the failed run cached stays reserved otherwise
  const int status = run("1GiB", text);
  set_cuda_memory_limit(kGpu, DeviceMemoryLimit{});  // the limit is the process's: lift it for the next tests
  REQUIRE(status == 0);
  REQUIRE_THAT(text, Contains("loss: "));
}

TEST_CASE("gpu factories and autograd: full() fills on the device; an unused output's zeros live there too",
          "[gpu][train]") {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64}) {
    INFO(dtype_name(dtype));
    for (double value : {0.0, 1.0, 1.0 / 3.0, -2.5e4}) {
      const Tensor g = full({3, 5}, value, dtype, kGpu);
      REQUIRE(g.device() == kGpu);
      REQUIRE(g.to(Device::cpu()).to_vector() == full({3, 5}, value, dtype).to_vector());
    }
  }
  // split has several outputs; only the first is used, so the tape seeds the others with zeros —
  // on the outputs' device (they used to be made on the host, and the concat backward then failed).
  Tensor x = randn({6, 4}, DType::f32, kGpu);
  x.requires_grad_(true);
  Tape tape;
  Tensor loss;
  {
    TapeGuard guard(tape);
    loss = sum(split(x, 2, 0)[0] * 3.0);
  }
  tape.backward(loss);
  const std::vector<double> g = x.grad().to(Device::cpu()).to_vector();
  for (size_t i = 0; i < g.size(); ++i) REQUIRE(g[i] == (i < 8 ? 3.0 : 0.0));
}

TEST_CASE("gpu train --data: a language model on token shards, bf16 on the GPU through a 2-stage pipeline with 2 "
          "replicas, starts at the CPU's loss and learns; generate runs on the GPU from its checkpoint",
          "[gpu][train]") {
  test::TempDir work("brigade_gpu_lm");
  // A small corpus with structure (the same few sentences in a seeded order) and a tokenizer for it.
  const char* sentences[] = {"the cat sees the ball. ", "a dog finds a red box. ", "my friend likes bread. "};
  std::string corpus;
  for (uint64_t i = 0; corpus.size() < 12000; ++i) corpus += sentences[philox4x32(i, 5)[0] % 3];
  std::ofstream(work.file("corpus.txt")) << corpus;
  text::save_tokenizer(text::train_bpe(std::vector<std::string>{corpus}, {.vocab_size = 280}), work.file("tok"));
  std::ostringstream out, err;
  REQUIRE(data_cli::data_command({"prepare", "--tokenizer", work.file("tok"), "--out", work.file("data"),
                                  work.file("corpus.txt")},
                                 out, err) == 0);

  auto options = [&](Device device) {
    train::TrainOptions o;
    o.data = work.file("data");
    o.device = device;
    o.context = 16;
    o.layers = 1;
    o.heads = 2;
    o.embd = 32;
    o.batch = 8;
    o.steps = 40;
    o.warmup = 5;
    o.lr = 5e-3;
    o.log_every = 20;
    o.eval_every = 40;
    o.eval_examples = 8;
    o.trace = o.svg = "none";
    return o;
  };
  train::TrainOptions cpu = options(Device::cpu());
  cpu.stages = 0;
  cpu.steps = 1;
  std::ostringstream cpu_out;
  const train::TrainSummary reference = train::run_training(cpu, cpu_out);

  train::TrainOptions gpu = options(kGpu);
  gpu.stages = 2;
  gpu.replicas = 2;
  gpu.microbatches = 2;
  gpu.save = work.file("lm.safetensors");
  std::ostringstream gpu_out;
  const train::TrainSummary summary = train::run_training(gpu, gpu_out);
  INFO(gpu_out.str());
  REQUIRE_THAT(gpu_out.str(), Contains(", cuda:0, bf16 compute with f32 master weights"));
  REQUIRE(summary.first_loss == Approx(reference.first_loss).epsilon(0.02));  // bf16 against f32
  REQUIRE(summary.validation.size() == 2);
  REQUIRE(summary.validation[1].second < 0.8 * summary.validation[0].second);

  std::ostringstream gen_out, gen_err;
  REQUIRE(generate_cli::generate_command({"--checkpoint", work.file("lm.safetensors"), "--device", "cuda", "--prompt",
                                          "the cat", "--tokens", "8", "--temperature", "0"},
                                         gen_out, gen_err) == 0);
  INFO(gen_err.str());
  REQUIRE(gen_out.str().rfind("the cat", 0) == 0);
  REQUIRE_THAT(gen_out.str(), Contains("KV cache, cuda:0"));
}
