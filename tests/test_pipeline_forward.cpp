// The forward-only pass (evaluation through the stages) against one device.
//
// The reference is the same GPT (same seed) on one device: model(ids) for the logits,
// language_model_loss(model(ids), targets) for the loss. The pipeline runs the same layers in the
// same order with the same kernels, so on the CPU every logit and every loss must be BITWISE equal,
// on every rank it is broadcast to. Sends are rendezvous (gloo and NCCL at their strictest), so a
// forward-only schedule whose exchanges could wait in a cycle fails here.
#include <mutex>
#include <set>

#include "comm/comm.h"
#include "comm/thread_ranks.h"
#include "nn/gpt.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/exchange.h"
#include "pipeline/gpt_decode.h"
#include "pipeline/gpt_stages.h"
#include "pipeline/runtime.h"
#include "pipeline/trace.h"
#include "pipeline_step.h"
#include "test_util.h"

using namespace brigade;
using namespace brigade::pipeline;
using Catch::Contains;

namespace {

// 5 layers: with P = 4 and V = 2 some of the 8 stages are empty.
nn::GPTConfig tiny_gpt() { return test::tiny_gpt_config(); }

// Ids in [0, 11) from a counter hash.
Tensor ids(int64_t b, int64_t t, uint64_t seed) {
  Tensor out = zeros({b, t}, DType::i64);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < b * t; ++i) {
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    out.data<int64_t>()[i] = int64_t(x % 11);
  }
  return out;
}

// M micro-batches of different shapes (rows 2 or 1, lengths 3..8), as evaluation batches and
// decoded sequences are.
struct Batches {
  std::vector<Tensor> inputs, targets;
};
Batches batches(int M) {
  Batches b;
  for (int m = 0; m < M; ++m) {
    b.inputs.push_back(ids(m % 3 == 2 ? 1 : 2, 3 + m % 6, uint64_t(m) + 1));
    b.targets.push_back(ids(m % 3 == 2 ? 1 : 2, 3 + m % 6, uint64_t(m) + 101));
  }
  return b;
}

struct Got {
  std::vector<std::vector<Tensor>> outputs;  // [rank][micro-batch]
  std::vector<std::vector<double>> losses;   // [rank][micro-batch]
  Trace trace;                               // pipe.last_trace() after the passes, on rank 0
  Schedule schedule;                         // the training schedule the pipeline ran, on rank 0
};

// A pipeline of P threads trained with `kind`'s schedule; evaluates `b` forward only.
Got forward_through_stages(ScheduleKind kind, int P, const Batches& b, bool trace = false) {
  const int M = int(b.inputs.size());
  const Schedule training = make_schedule(kind, P, P);  // M = P suits every kind's rules
  const Partition partition = partition_uniform(tiny_gpt().n_layer + 2, training.stages());
  auto comms = comm::local_group(P, Device::cpu(), comm::Milliseconds(20'000), comm::LocalSends::rendezvous);
  Got got;
  got.outputs.resize(size_t(P));
  got.losses.resize(size_t(P));
  std::mutex mutex;
  auto errors = test::run_ranks(comms, [&](comm::Communicator& comm) {
    // Only this rank's layers (drawn by name: the whole model's values there).
    const std::shared_ptr<nn::GPT> model = gpt_rank_model(tiny_gpt(), partition, training.layout, comm.rank());
    GptStages mine = gpt_stages(*model, partition, training.layout, comm.rank());
    PipelineOptions options;
    options.ties = mine.ties;
    options.trace = trace;
    PipelineGroups groups;
    groups.pipeline = &comm;
    Pipeline pipe(groups, training, mine.chunks, mine.loss, options);
    // A training step first, as in `brigade train`: its messages and the pass's share the
    // communicator (gradients accumulate; the weights stay as they are).
    std::vector<Tensor> step_inputs(static_cast<size_t>(P)), step_targets(static_cast<size_t>(P));
    for (int m = 0; m < P; ++m) {
      step_inputs[size_t(m)] = ids(2, 6, uint64_t(m) + 7);
      step_targets[size_t(m)] = ids(2, 6, uint64_t(m) + 70);
    }
    pipe.forward_backward(step_inputs, step_targets);
    std::vector<Tensor> outputs = pipe.forward_outputs(M, b.inputs);
    std::vector<double> losses = pipe.forward_losses(M, b.inputs, b.targets);
    std::lock_guard<std::mutex> lock(mutex);
    got.outputs[size_t(comm.rank())] = outputs;
    got.losses[size_t(comm.rank())] = losses;
    if (comm.rank() == 0) {
      got.trace = pipe.last_trace();
      got.schedule = pipe.schedule();
    }
  });
  for (size_t i = 0; i < errors.size(); ++i) INFO("rank " << i << ": " << errors[i]);
  for (const std::string& e : errors) REQUIRE(e.empty());
  return got;
}

}  // namespace

TEST_CASE("forward only: every rank gets one device's logits and losses, bitwise", "[pipeline][forward]") {
  nn::GPT reference(tiny_gpt());
  const Batches b = batches(5);
  for (ScheduleKind kind : {ScheduleKind::one_f_one_b, ScheduleKind::gpipe, ScheduleKind::interleaved,
                            ScheduleKind::zb_v}) {
    for (int P : {2, 4}) {
      INFO(schedule_name(kind) << " P=" << P);
      const Got got = forward_through_stages(kind, P, b);
      for (int r = 0; r < P; ++r) {
        INFO("rank " << r);
        REQUIRE(got.outputs[size_t(r)].size() == b.inputs.size());
        REQUIRE(got.losses[size_t(r)].size() == b.inputs.size());
        for (size_t m = 0; m < b.inputs.size(); ++m) {
          INFO("micro-batch " << m);
          NoGradGuard no_grad;
          const Tensor logits = reference(b.inputs[m]);
          test::require_equal(got.outputs[size_t(r)][m], logits);
          REQUIRE(got.losses[size_t(r)][m] == nn::language_model_loss(logits, b.targets[m]).item());
        }
      }
    }
  }
}

TEST_CASE("forward only: what the last stage keeps is what travels", "[pipeline][forward]") {
  // Decoding wants the last position's logits only.
  const Batches b = batches(3);
  const int P = 2;
  const Schedule training = make_schedule(ScheduleKind::one_f_one_b, P, P);
  const Partition partition = partition_uniform(5, P);
  auto comms = comm::local_group(P);
  std::vector<std::vector<Tensor>> got(P);
  auto errors = test::run_ranks(comms, [&](comm::Communicator& comm) {
    nn::GPT model(tiny_gpt());
    GptStages mine = gpt_stages(model, partition, training.layout, comm.rank());
    PipelineGroups groups;
    groups.pipeline = &comm;
    PipelineOptions options;
    options.ties = mine.ties;
    Pipeline pipe(groups, training, mine.chunks, mine.loss, options);
    got[size_t(comm.rank())] =
        pipe.forward_outputs(3, b.inputs, [](const Tensor& logits) { return logits.select(1, -1); });
  });
  for (const std::string& e : errors) REQUIRE(e.empty());
  nn::GPT reference(tiny_gpt());
  NoGradGuard no_grad;
  for (int r = 0; r < P; ++r)
    for (size_t m = 0; m < 3; ++m) test::require_equal(got[size_t(r)][m], reference(b.inputs[m]).select(1, -1));
}

TEST_CASE("forward only: the schedule runs every F once, stashes nothing, and passes the checks",
          "[pipeline][forward]") {
  for (ScheduleKind kind : all_schedule_kinds()) {
    for (int P : {1, 2, 3, 4}) {
      for (int M : {1, 2, 5, 9}) {
        const Layout layout{P, default_chunks(kind), placement_of(kind)};
        INFO(schedule_name(kind) << " P=" << P << " V=" << layout.chunks << " M=" << M);
        const Schedule s = forward_only_schedule(layout, M);
        REQUIRE(s.forward_only());
        REQUIRE(s.name == "forward");
        size_t forwards = 0;
        for (const auto& list : s.actions)
          for (const Action& a : list) {
            REQUIRE((!is_compute(a.kind) || a.kind == ActionKind::forward));
            forwards += a.kind == ActionKind::forward;
          }
        REQUIRE(forwards == size_t(M) * size_t(layout.stages()));
        const SimulationResult sim = simulate(s);  // throws on a missing F, a deadlock, a bad message
        for (int peak : sim.peak_activations) REQUIRE(peak == 0);
        // One chunk per rank: the forward half of GPipe, M + P - 1 units.
        if (layout.chunks == 1) REQUIRE(sim.makespan == double(M + P - 1));
        // With rendezvous sends (gloo, NCCL) the exchanges cannot wait in a cycle.
        if (P > 1) REQUIRE_NOTHROW(check_exchanges(s));
      }
    }
  }
  // A training schedule is not forward only; a forward-only schedule missing a micro-batch is refused.
  REQUIRE(!make_schedule(ScheduleKind::gpipe, 2, 2).forward_only());
  Schedule missing = forward_only_order(Layout{2, 1, Placement::interleaved}, 3);
  missing.actions[1].pop_back();
  REQUIRE_THROWS_WITH(simulate(add_communication(missing)), Contains("never runs F for micro-batch 2"));
}

TEST_CASE("forward only: evaluating after a traced step leaves that step's trace", "[pipeline][forward]") {
  // The timeline, the bubble and the memory report compare last_trace() with the training schedule;
  // an evaluation after the last step (more micro-batches than a step has) once replaced it, and the
  // comparison failed the run before its final save.
  const int P = 2;
  const Batches b = batches(6);  // more micro-batches than the training step's P
  const Got got = forward_through_stages(ScheduleKind::zb_v, P, b, /*trace=*/true);
  size_t total = 0;
  for (const auto& list : got.schedule.actions) total += list.size();
  REQUIRE(got.trace.ranks == P);
  REQUIRE(got.trace.events.size() == total);
  const SimulationResult measured = to_simulation(got.trace, got.schedule);
  REQUIRE(measured.makespan > 0);
  REQUIRE(measured.bubble_fraction >= 0);
  REQUIRE(measured.bubble_fraction < 1);
}

TEST_CASE("generation through the stages: the tokens equal one device's, each stage holding its own layers and "
          "their KV cache only",
          "[pipeline][forward][generate]") {
  const nn::GPTConfig config = tiny_gpt();  // 5 layers: the embedding, 3 blocks, the head
  nn::GPT whole(config);
  whole.eval();
  std::map<std::string, Tensor> whole_state = whole.state_dict();
  // 3 prompt tokens and 9 new ones: past the context of 8, so the last steps slide the window.
  const Tensor prompt = ids(2, 3, 7);
  nn::GenerateOptions greedy, sampled, uncached;
  sampled.temperature = 1.0;
  sampled.top_k = 5;
  sampled.seed = 3;
  uncached.kv_cache = false;
  for (int P : {2, 3, 5}) {
    const Partition partition = decode_partition(config, P);
    for (const nn::GenerateOptions& g : {greedy, sampled, uncached}) {
      const std::vector<double> reference = whole.generate(prompt, 9, g).to_vector();
      auto comms = comm::local_group(P);
      std::vector<std::set<std::string>> held(static_cast<size_t>(P));
      Tensor got;
      REQUIRE(test::all_ok(test::run_ranks(comms, [&](comm::Communicator& comm) {
        auto part = gpt_rank_model(config, partition, Layout{P, 1}, comm.rank());
        part->eval();
        for (auto& [name, t] : part->state_dict()) held[size_t(comm.rank())].insert(name);
        const Tensor out = generate_through_stages(comm, *part, partition, comm.rank() == 0 ? prompt : Tensor(), 9, g);
        if (comm.rank() == 0) got = out;
      })));
      INFO("P=" << P << ", temperature " << g.temperature << (g.kv_cache ? "" : ", no cache"));
      REQUIRE(got.shape() == Shape{2, 12});
      REQUIRE(got.to_vector() == reference);
      // Stage s holds exactly the whole model's parameters of its layers (the head's stage: the tied
      // token table too), by name.
      for (int s = 0; s < P; ++s) {
        std::set<std::string> expected;
        for (const auto& [name, t] : whole_state) {
          bool mine = false;
          for (int64_t i = partition.begin(s); i < partition.end(s); ++i) {
            const std::string prefix = i == 0 ? "embed." : i == config.n_layer + 1 ? "head." : "blocks." + std::to_string(i - 1) + ".";
            mine = mine || name.rfind(prefix, 0) == 0 || (i == config.n_layer + 1 && name == "embed.wte.weight");
          }
          if (mine) expected.insert(name);
        }
        REQUIRE(held[size_t(s)] == expected);
      }
    }
  }
  // A stage's KV cache has its own blocks' layers only: one sized for the whole model is refused.
  const Partition two = decode_partition(config, 2);
  auto last = gpt_rank_model(config, two, Layout{2, 1}, 1);
  nn::KVCache whole_cache(config.n_layer, config.block_size);
  REQUIRE_THROWS_WITH(last->forward_cached(zeros({1, 1, config.n_embd}), whole_cache),
                      Contains("a KV cache of 3 layers and 8 positions does not fit this model's 2 blocks"));
  // More stages than layers.
  REQUIRE_THROWS_WITH(decode_partition(config, 6), Contains("6 stages for a GPT of 5 layers"));
}
