// The pipeline runtime against one-device training.
//
// The reference: the same GPT (same seed, so the same weights) on one device, running the same
// micro-batches one after another, each backward seeded with 1/M — exactly the gradient of the mean
// loss that a pipeline step computes. On the CPU the pipeline runs the same kernels in the same
// accumulation order, so every loss and every gradient must be BITWISE equal — except the tied
// embedding when its two uses sit on different stages: there the two gradient halves are summed per
// stage first and then added, one rounding order that one device does not share, so it is compared
// to a tight tolerance instead.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "every_schedule.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "comm/comm.h"
#include "comm/thread_ranks.h"
#include "nn/gpt.h"
#include "nn/linear.h"
#include "pipeline/exchange.h"
#include "pipeline/executor.h"
#include "pipeline/gpt_stages.h"
#include "pipeline/replica_buckets.h"
#include "pipeline/runtime.h"
#include "pipeline/schedule_csv.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline_reference.h"
#include "test_util.h"
#include "skip_model.h"

using namespace brigade;
using namespace brigade::pipeline;
using Catch::Contains;

using namespace test::runtime;

TEST_CASE("runtime: every schedule equals one-device training, bitwise on the CPU", "[pipeline][runtime]") {
  // P = 1, M = P, P > layers (P = 6 or 7 with 5 layers: empty stages pass activations through), M < P,
  // M not a multiple of P.
  std::vector<test::ScheduleCase> grid;
  for (ScheduleKind kind : {ScheduleKind::naive, ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1})
    for (int P : {1, 2, 3, 4, 6})
      for (int M : {1, P, 2 * P + 1}) grid.push_back({kind, P, M, 1});
  for (int P : {1, 2, 3})
    for (int V : {2, 3})
      for (int M : {P, 2 * P, 3 * P}) grid.push_back({ScheduleKind::interleaved, P, M, V});
  grid.push_back({ScheduleKind::one_f_one_b, 7, 3, 1});
  // ZB-V: the turn on rank P-1 and both ends of the model (the tied embedding's two uses) on rank 0;
  // M below, at and past 2P (where it fills the pipe). With rendezvous sends below: a deadlock grid.
  for (int P : {1, 2, 3, 4})
    for (int M : {1, 2, P + 1, 2 * P, 2 * P + 1}) grid.push_back({ScheduleKind::zb_v, P, M, 2});
  // DualPipeV: the same V with overlapped F&B pairs, whole backwards mixed with I + W; M >= 2P.
  for (int P : {1, 2, 3, 4})
    for (int M : {2 * P, 2 * P + 1, 3 * P}) grid.push_back({ScheduleKind::dualpipev, P, M, 2});

  for (const test::ScheduleCase& c : grid) {
    DYNAMIC_SECTION(schedule_name(c.kind) << " P=" << c.P << " M=" << c.M << " V=" << c.V) {
      Batch batch = make_batch(c.M, uint64_t(c.P * 131 + c.M));
      Result want = reference(batch);
      Result got = pipelined(c.kind, c.P, c.M, c.V, batch);
      require_same(got, want, tolerant_name(c.P * c.V));
      // The same with sends that wait for their receivers, as across processes: nothing hangs (the
      // default timeout would fail the test) and nothing changes.
      Result strict = pipelined(c.kind, c.P, c.M, c.V, batch, {}, tiny_gpt(), comm::LocalSends::rendezvous);
      require_same(strict, want, tolerant_name(c.P * c.V));

      // Each rank held exactly the activations the simulator predicts.
      SimulationResult sim = simulate(make_schedule(c.kind, c.P, c.M, c.V));
      for (int r = 0; r < c.P; ++r) {
        INFO("rank " << r);
        REQUIRE(got.peak_stashed[size_t(r)] == sim.peak_activations_per_rank[size_t(r)]);
      }
    }
  }
}

TEST_CASE("runtime: blocks cut in halves, split by time, equal one device running the halves", "[pipeline][runtime]") {
  // --partition balanced's shape: 3 blocks as 6 halves + embedding + head = 8 layers, cut where
  // made-up costs say (cheap ends, the embedding and head sharing stages with halves), every
  // schedule kind, on rendezvous sends.
  const std::vector<double> costs = {0.1, 2, 3, 2, 3, 2, 3, 0.5};
  using Config = test::ScheduleCase;
  for (const Config& c : {Config{ScheduleKind::one_f_one_b, 4, 5, 1}, Config{ScheduleKind::gpipe, 4, 3, 1},
                          Config{ScheduleKind::zb_h1, 2, 4, 1}, Config{ScheduleKind::interleaved, 2, 4, 2},
                          Config{ScheduleKind::zb_v, 2, 4, 2}, Config{ScheduleKind::dualpipev, 2, 4, 2}}) {
    DYNAMIC_SECTION(schedule_name(c.kind) << " P=" << c.P << " M=" << c.M << " V=" << c.V) {
      const Partition partition = partition_by_cost(costs, c.P * c.V, "ms");
      // Layers 1-2, 3-4 and 5-6 are one block each: a bound at 2, 4 or 6 cuts one in two.
      CHECK(std::any_of(partition.bounds.begin(), partition.bounds.end(), [](int64_t b) { return b % 2 == 0 && b > 0 && b < 8; }));
      Batch batch = make_batch(c.M, uint64_t(c.P * 17 + c.M));
      const Result want = reference(batch, tiny_gpt(), nn::LayerGrain::half_block);
      const Result got = pipelined(make_schedule(c.kind, c.P, c.M, c.V), batch, {}, tiny_gpt(),
                                   comm::LocalSends::rendezvous, nn::LayerGrain::half_block, partition);
      const bool tied_apart = partition.stage_of_layer(0) != partition.stage_of_layer(partition.layers() - 1);
      require_same(got, want, tied_apart ? "embed.wte.weight" : "");
    }
  }
}

TEST_CASE("runtime: with rendezvous sends, interleaved's messages must be combined per iteration",
          "[pipeline][runtime]") {
  // P=2, V=2, M=4 with every message next to its action: the simulator runs it, but check_exchanges
  // predicts a deadlock when sends wait for their receivers. The runtime refuses it on such a
  // transport — and, run anyway by the executor, it really hangs until the timeout.
  const int P = 2, M = 4, V = 2;
  const Schedule eager = add_communication(interleaved_order(P, M, V));
  REQUIRE_THROWS_WITH(check_exchanges(eager), Contains("deadlock under rendezvous semantics"));
  const Partition partition = partition_uniform(5, P * V);
  Batch batch = make_batch(M, 77);

  auto refused = comm::local_group(P, Device::cpu(), std::chrono::milliseconds(2000), comm::LocalSends::rendezvous);
  auto refusals = test::run_ranks(refused, [&](comm::Communicator& comm) {
    nn::GPT model(tiny_gpt());
    Pipeline pipe = whole_model_pipeline(model, partition, eager, comm);
  });
  for (const std::string& e : refusals) REQUIRE_THAT(e, Contains("deadlock under rendezvous semantics"));

  auto strict = comm::local_group(P, Device::cpu(), std::chrono::milliseconds(500), comm::LocalSends::rendezvous);
  auto start = std::chrono::steady_clock::now();
  auto errors = test::run_ranks(strict, [&](comm::Communicator& comm) {
    nn::GPT model(tiny_gpt());
    GptStages mine = gpt_stages(model, partition, eager.layout, comm.rank());
    Executor executor(comm, eager, mine.chunks, mine.loss);
    executor.run(batch.inputs, batch.targets, 1.0 / M);
  });
  REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  bool timed_out = false;
  for (const std::string& e : errors) timed_out = timed_out || e.find("timed out") != std::string::npos;
  INFO(errors[0] << "\n" << errors[1]);
  REQUIRE(timed_out);

  // make_schedule's placement runs on the same transport and equals one device (the tied embedding
  // is on two stages: tolerant).
  require_same(pipelined(ScheduleKind::interleaved, P, M, V, batch, {}, tiny_gpt(), comm::LocalSends::rendezvous),
               reference(batch), tolerant_name(P * V));
}

TEST_CASE("runtime: schedules from PyTorch-format files equal one device, bitwise", "[pipeline][runtime]") {
  // Written by hand as torch.distributed.pipelining's _dump_csv writes them (compute only, idle
  // cells, \r\n): ScheduleZBVZeroBubble and ScheduleDualPipeV on 2 ranks with 4 micro-batches (stages
  // 0 and 3 on rank 0, 1 and 2 on rank 1), and a 1F1B with whole backwards on 3 ranks whose last rank forwards micro-batch
  // 1 before 0 — an order no generator here makes. Both run on queued and on rendezvous sends.
  const std::vector<std::pair<std::string, std::string>> files = {
      {"zbv.csv",
       "0F0,0F1,0F2,3F0,3I0,3W0,3F1,3I1,3W1,0F3,0I0,0W0,3F2,3I2,3W2,0I1,0W1,3F3,3I3,3W3,0I2,0W2,0I3,0W3\r\n"
       ",1F0,2F0,1F1,2F1,2I0,2W0,1F2,1I0,1W0,2F2,2I1,2W1,1F3,1I1,1W1,2F3,2I2,2W2,1I2,2I3,1I3,1W2,2W3,1W3\r\n"},
      {"dualpipev.csv",  // ScheduleDualPipeV, 2 ranks, 4 micro-batches: overlapped pairs run back to back
       "0F0,0F1,0F2,3F0,3I0,3W0,3F1,(0F3;3B1)OVERLAP_F_B,(3F2;0B0)OVERLAP_F_B,3B2,(3F3;0B1)OVERLAP_F_B,3B3,0I2,0W2,"
       "0I3,0W3\r\n"
       "1F0,2F0,1F1,2F1,1F2,2B0,(2F2;1B0)OVERLAP_F_B,(1F3;2B1)OVERLAP_F_B,(2F3;1B1)OVERLAP_F_B,2B2,1B2,2I3,1I3,2W3,"
       "1W3\r\n"},
      {"1f1b-swapped.csv",
       "0F0,0F1,0F2,,0B0,0F3,0B1,0B2,0B3\r\n"
       ",1F0,1F1,1B0,1F2,1B1,1F3,1B2,1B3\r\n"
       ",,2F1,2F0,2B1,2B0,2F2,2B2,2F3,2B3\r\n"},
  };
  for (const auto& [name, text] : files) {
    DYNAMIC_SECTION(name) {
      const Schedule schedule = schedule_from_file(parse_schedule_csv(text, name));
      const int M = schedule.microbatches;
      Batch batch = make_batch(M, 97);
      const Result want = reference(batch);
      require_same(pipelined(schedule, batch), want, tolerant_name(schedule.stages()));
      require_same(pipelined(schedule, batch, {}, tiny_gpt(), comm::LocalSends::rendezvous), want,
                   tolerant_name(schedule.stages()));
    }
  }
}

TEST_CASE("runtime: bf16 compute with f32 master weights equals one device, bitwise", "[pipeline][runtime]") {
  // Activations and the messages between stages are bf16; each stage casts its f32 weights per
  // micro-batch exactly as the one-device model does, and the gradients accumulate in f32.
  nn::GPTConfig config = tiny_gpt();
  config.compute_dtype = DType::bf16;
  for (auto [kind, P, M, V] : {std::tuple{ScheduleKind::one_f_one_b, 3, 4, 1}, std::tuple{ScheduleKind::zb_h1, 2, 3, 1},
                               std::tuple{ScheduleKind::interleaved, 2, 4, 2}}) {
    DYNAMIC_SECTION(schedule_name(kind) << " P=" << P << " M=" << M << " V=" << V) {
      Batch batch = make_batch(M, 91);
      Result want = reference(batch, config);
      Result got = pipelined(kind, P, M, V, batch, {}, config, comm::LocalSends::rendezvous);
      require_same(got, want, tolerant_name(P * V));
      for (auto& [name, g] : got.grads) REQUIRE(g.dtype() == DType::f32);
    }
  }
  SECTION("with recomputation: the backward runs each stage again in bf16, as its forward did") {
    PipelineOptions options;
    options.recompute = true;
    Batch batch = make_batch(4, 92);
    require_same(pipelined(ScheduleKind::one_f_one_b, 2, 4, 1, batch, options, config, comm::LocalSends::rendezvous),
                 reference(batch, config), tolerant_name(2));
  }
}

TEST_CASE("runtime: peak stashed activations match theory", "[pipeline][runtime]") {
  const int P = 4, M = 8;
  Batch batch = make_batch(M, 3);
  Result gpipe = pipelined(ScheduleKind::gpipe, P, M, 1, batch);
  Result one_f_one_b = pipelined(ScheduleKind::one_f_one_b, P, M, 1, batch);
  for (int r = 0; r < P; ++r) {
    INFO("rank " << r);
    REQUIRE(gpipe.peak_stashed[size_t(r)] == M);
    REQUIRE(one_f_one_b.peak_stashed[size_t(r)] == P - r);
  }
}

TEST_CASE("runtime: recomputation gives the same gradients, bitwise", "[pipeline][runtime]") {
  PipelineOptions options;
  options.recompute = true;
  for (ScheduleKind kind : {ScheduleKind::one_f_one_b, ScheduleKind::zb_h1, ScheduleKind::gpipe}) {
    DYNAMIC_SECTION(schedule_name(kind)) {
      Batch batch = make_batch(5, 11);
      require_same(pipelined(kind, 3, 5, 1, batch, options), reference(batch), tolerant_name(3));
    }
  }
  SECTION("interleaved") {
    Batch batch = make_batch(4, 12);
    require_same(pipelined(ScheduleKind::interleaved, 2, 4, 2, batch, options), reference(batch), tolerant_name(4));
  }
}

TEST_CASE("runtime: micro-batches of different sequence lengths, with variable shapes on", "[pipeline][runtime]") {
  PipelineOptions options;
  options.variable_shapes = true;
  Batch batch = make_batch(6, 21, /*varying=*/true);
  require_same(pipelined(ScheduleKind::one_f_one_b, 3, 6, 1, batch, options), reference(batch), tolerant_name(3));
  require_same(pipelined(ScheduleKind::zb_h1, 2, 6, 1, batch, options), reference(batch), tolerant_name(2));
}

TEST_CASE("runtime: changing shapes without variable shapes is a clear error, not a hang", "[pipeline][runtime]") {
  Batch batch = make_batch(4, 22, /*varying=*/true);
  Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, 2, 4);
  Partition partition = partition_uniform(5, 2);
  auto comms = comm::local_group(2);
  auto errors = test::run_ranks(comms, [&](comm::Communicator& comm) {
    nn::GPT model(tiny_gpt());
    Pipeline pipe = whole_model_pipeline(model, partition, schedule, comm);
    pipe.forward_backward(batch.inputs, batch.targets);
  });
  REQUIRE(!errors[0].empty());
  REQUIRE(!errors[1].empty());
  // The rank that sent a new shape on a fixed channel names it; the other learns of the failure.
  REQUIRE_THAT(errors[0] + errors[1], Contains("fixed"));
}

TEST_CASE("runtime: the global grad norm and clipping equal one device's", "[pipeline][runtime]") {
  const int P = 3, M = 3;
  Batch batch = make_batch(M, 31);
  // One device.
  nn::GPT model(tiny_gpt());
  for (int m = 0; m < M; ++m) {
    Tape tape;
    Tensor loss;
    {
      TapeGuard recording(tape);
      loss = model.loss(batch.inputs[size_t(m)], batch.targets[size_t(m)]);
    }
    tape.backward({loss}, {full({}, 1.0 / M)});
  }
  double want_norm = 0;  // in f64, independently of optim::clip_grad_norm
  for (const Tensor& p : model.parameters())
    for (double v : p.grad().to_vector()) want_norm += v * v;
  want_norm = std::sqrt(want_norm);
  const double max_norm = want_norm / 4;  // so clipping happens
  std::map<std::string, std::vector<double>> want_clipped;
  for (auto& [name, p] : model.named_parameters()) {
    std::vector<double> g = p.grad().to_vector();
    for (double& v : g) v *= max_norm / (want_norm + 1e-6);
    want_clipped[name] = g;
  }

  Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, P, M);
  Partition partition = partition_uniform(5, P);
  auto comms = comm::local_group(P);
  std::vector<double> norms(P);
  std::map<std::string, Tensor> got;
  std::mutex mutex;
  auto errors = test::run_ranks(comms, [&](comm::Communicator& comm) {
    nn::GPT replica(tiny_gpt());
    Pipeline pipe = whole_model_pipeline(replica, partition, schedule, comm);
    pipe.forward_backward(batch.inputs, batch.targets);
    norms[size_t(comm.rank())] = pipe.clip_grad_norm(max_norm);
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [name, p] : replica.named_parameters())
      if (p.grad().defined()) got[name] = p.grad();
  });
  for (const std::string& e : errors) REQUIRE(e.empty());
  for (double n : norms) {
    REQUIRE(n == norms[0]);  // the same on every rank
    REQUIRE(n == Approx(want_norm).epsilon(1e-6));  // the tied gradient differs in its last bits
  }
  REQUIRE(got.size() == want_clipped.size());
  for (auto& [name, g] : want_clipped) {
    INFO(name);
    test::require_close(got.at(name), g, 1e-9, 1e-5);
  }
}

TEST_CASE("runtime: data parallelism averages replicas to the one-device gradient", "[pipeline][runtime]") {
  // 2 replicas x 2 stages: replica k runs micro-batches [k*M, (k+1)*M); one device runs all 2M with
  // seed 1/(2M). The replica average adds in another order, so: a tight tolerance. Gradients travel
  // in buckets (PipelineOptions::bucket_bytes): all in one, a few parameters each, or one each — the
  // averages must be bitwise the same.
  const int P = 2, M = 3, R = 2;
  Batch all = make_batch(R * M, 41);
  Result want = reference(all);
  Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, P, M);
  Partition partition = partition_uniform(5, P);
  std::map<size_t, std::map<std::string, Tensor>> by_bucket;
  for (size_t bucket_bytes : {size_t(25) << 20, size_t(600), size_t(0)}) {
    auto world = comm::local_group(P * R);
    std::map<std::string, Tensor>& got = by_bucket[bucket_bytes];
    std::vector<double> losses(P * R);
    std::mutex mutex;
    auto errors = test::run_ranks(world, [&](comm::Communicator& comm) {
      auto groups = PipelineGroups::split(comm, P);
      nn::GPT model(tiny_gpt());
      GptStages mine = gpt_stages(model, partition, schedule.layout, groups->pipeline->rank());
      PipelineOptions options = with_ties(mine.ties);
      options.bucket_bytes = bucket_bytes;
      Pipeline pipe(*groups, schedule, mine.chunks, mine.loss, options);
      Batch part;
      for (int m = 0; m < M; ++m) {
        part.inputs.push_back(all.inputs[size_t(groups->replica * M + m)]);
        part.targets.push_back(all.targets[size_t(groups->replica * M + m)]);
      }
      StepStats stats = pipe.forward_backward(part.inputs, part.targets);
      std::lock_guard<std::mutex> lock(mutex);
      losses[size_t(comm.rank())] = stats.loss;
      for (auto& [name, p] : model.named_parameters())
        if (p.grad().defined()) got[name] = p.grad();
    });
    for (const std::string& e : errors) REQUIRE(e.empty());
    for (double l : losses) REQUIRE(l == Approx(want.loss).epsilon(1e-12));
    REQUIRE(got.size() == want.grads.size());
    for (auto& [name, g] : want.grads) {
      INFO(name << ", buckets of " << bucket_bytes << " bytes");
      test::require_close(got.at(name), g, 1e-7, 1e-5);
      test::require_equal(got.at(name), by_bucket.at(size_t(25) << 20).at(name));  // the first run
    }
  }
}

TEST_CASE("runtime: replica buckets list the all-reduces a step makes, to connect them first", "[pipeline][runtime]") {
  // Consecutive gradients of one dtype share a bucket up to bucket_bytes (pipeline/replica_buckets.h):
  // with 40 bytes, f32 [3] and [5] share one (32 bytes), [200] is alone (it does not fit with them),
  // [7] starts the next, f64 [2] another dtype: 8, 200 and 7 f32 elements, then 2 f64 — each
  // averaged. The tied [4] goes last. Every bucket's use is listed, and buckets() counts them.
  auto param = [](int64_t n, DType dtype) { return zeros({n}, dtype).requires_grad_(); };
  const std::vector<Tensor> chunk0 = {param(3, DType::f32), param(5, DType::f32), param(200, DType::f32)};
  const std::vector<Tensor> chunk1 = {param(7, DType::f32), param(2, DType::f64)};
  const ReplicaBuckets buckets({chunk0, chunk1}, {param(4, DType::f32)}, 40);
  const std::vector<comm::CollectiveUse> uses = buckets.uses();
  const std::vector<std::pair<int64_t, DType>> want = {
      {8, DType::f32}, {200, DType::f32}, {7, DType::f32}, {2, DType::f64}, {4, DType::f32}};
  REQUIRE(uses.size() == want.size());
  CHECK(buckets.buckets() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("bucket " << i);
    CHECK(uses[i].kind == comm::CollectiveUse::Kind::all_reduce);
    CHECK(uses[i].numel == want[i].first);
    CHECK(uses[i].dtype == want[i].second);
    CHECK(uses[i].op == comm::ReduceOp::average);
  }
}

TEST_CASE("runtime: a skip connection across stages gives one device's gradients", "[pipeline][runtime]") {
  const int M = 4;
  std::vector<Tensor> inputs, targets;
  for (int m = 0; m < M; ++m) {
    inputs.push_back(test::random({3, 4}, uint64_t(60 + m), DType::f32));
    targets.push_back(test::random({3, 3}, uint64_t(70 + m), DType::f32));
  }
  // One device, inside a SkipScope.
  Layers ref = test::skip_model();
  for (int m = 0; m < M; ++m) {
    Tape tape;
    Tensor loss;
    {
      TapeGuard recording(tape);
      SkipScope scope;
      Tensor x = inputs[size_t(m)];
      for (auto& layer : ref) x = layer->forward(x);
      loss = test::mse(x, targets[size_t(m)]);
    }
    tape.backward({loss}, {full({}, 1.0 / M)});
  }
  // 5 layers on P=5 stages (stash on stage 1, pop on stage 3, passing through stage 2), and on
  // P=2 x V=2 interleaved (layers 1 and 3 on different ranks).
  struct Config {
    ScheduleKind kind;
    int P, V;
    std::vector<int64_t> bounds;
  };
  for (const Config& c : {Config{ScheduleKind::one_f_one_b, 5, 1, {0, 1, 2, 3, 4, 5}},
                          Config{ScheduleKind::zb_h1, 3, 1, {0, 2, 3, 5}},
                          Config{ScheduleKind::interleaved, 2, 2, {0, 1, 2, 4, 5}}}) {
    DYNAMIC_SECTION(schedule_name(c.kind) << " P=" << c.P << " V=" << c.V) {
      Partition partition;
      partition.bounds = c.bounds;
      Schedule schedule = make_schedule(c.kind, c.P, M, c.V);
      const int from = int(partition.stage_of_layer(1)), to = int(partition.stage_of_layer(3));
      auto comms = comm::local_group(c.P);
      std::vector<std::vector<double>> got(5), got_bias(5);
      auto errors = test::run_ranks(comms, [&](comm::Communicator& comm) {
        Layers layers = test::skip_model();
        PipelineGroups groups;
        groups.pipeline = &comm;
        PipelineOptions options;
        options.skips = {{"early", from, to}};
        Pipeline pipe(groups, schedule, rank_chunks(layers, partition, schedule.layout, comm.rank()), test::mse, options);
        pipe.forward_backward(inputs, targets);
        for (int64_t l = 0; l < 5; ++l) {
          if (schedule.layout.rank_of(int(partition.stage_of_layer(l))) != comm.rank()) continue;
          auto* fc = dynamic_cast<nn::Linear*>(layers[size_t(l)]->named_children()[0].second.get());
          got[size_t(l)] = fc->weight.grad().to_vector();
          got_bias[size_t(l)] = fc->bias.grad().to_vector();
        }
      });
      for (size_t r = 0; r < errors.size(); ++r) {
        INFO("rank " << r << ": " << errors[r]);
        REQUIRE(errors[r].empty());
      }
      for (size_t l = 0; l < 5; ++l) {
        INFO("layer " << l);
        auto* fc = dynamic_cast<nn::Linear*>(ref[l]->named_children()[0].second.get());
        REQUIRE(!got[l].empty());
        test::require_close(fc->weight.grad(), got[l], 1e-7, 1e-5);
        test::require_close(fc->bias.grad(), got_bias[l], 1e-7, 1e-5);
      }
    }
  }
}

TEST_CASE("runtime: layer factories build only each rank's layers, and train as one device does",
          "[pipeline][runtime]") {
  // Five linear layers of a model of our own, each drawn by its name ("<i>.weight"): the factory of
  // layer i may run on any rank and still draw what one device draws.
  const nn::Init keyed = nn::Init::keyed(11);
  const int64_t widths[] = {4, 8, 8, 8, 8, 3};
  std::vector<std::atomic<int>> calls(5);
  auto factories = [&] {
    std::vector<LayerFactory> out;
    for (int64_t i = 0; i < 5; ++i)
      out.push_back([&, i] {
        ++calls[size_t(i)];
        return std::make_shared<nn::Linear>(widths[i], widths[i + 1], nn::LinearOptions{.init = keyed.at(std::to_string(i))});
      });
    return out;
  };
  const int M = 4;
  std::vector<Tensor> inputs, targets;
  for (int m = 0; m < M; ++m) {
    inputs.push_back(test::random({3, 4}, uint64_t(80 + m), DType::f32));
    targets.push_back(test::random({3, 3}, uint64_t(90 + m), DType::f32));
  }
  // One device: every layer from its factory, in order.
  Layers ref;
  for (const LayerFactory& make : factories()) ref.push_back(make());
  for (int m = 0; m < M; ++m) {
    Tape tape;
    Tensor loss;
    {
      TapeGuard recording(tape);
      Tensor x = inputs[size_t(m)];
      for (auto& layer : ref) x = (*layer)(x);
      loss = test::mse(x, targets[size_t(m)]);
    }
    tape.backward({loss}, {full({}, 1.0 / M)});
  }
  struct Config {
    ScheduleKind kind;
    int P, V;
  };
  for (const Config& c : {Config{ScheduleKind::one_f_one_b, 2, 1}, Config{ScheduleKind::gpipe, 3, 1},
                          Config{ScheduleKind::interleaved, 2, 2}, Config{ScheduleKind::zb_v, 2, 2}}) {
    DYNAMIC_SECTION(schedule_name(c.kind) << " P=" << c.P << " V=" << c.V) {
      for (auto& n : calls) n = 0;
      const Schedule schedule = make_schedule(c.kind, c.P, M, c.V);
      const Partition partition = partition_uniform(5, schedule.stages());
      auto comms = comm::local_group(c.P);
      std::vector<std::map<int64_t, std::vector<double>>> grads(size_t(c.P));  // per rank: layer -> weight grad
      std::vector<std::vector<int64_t>> built(size_t(c.P));
      auto errors = test::run_ranks(comms, [&](comm::Communicator& comm) {
        const std::vector<Chunk> chunks = build_rank_chunks(factories(), partition, schedule.layout, comm.rank());
        PipelineGroups groups;
        groups.pipeline = &comm;
        Pipeline pipe(groups, schedule, chunks, test::mse);
        pipe.forward_backward(inputs, targets);
        const std::vector<int64_t> mine = rank_layers(partition, schedule.layout, comm.rank());
        built[size_t(comm.rank())] = mine;
        // Chunk c holds stage layout.stage(rank, c): its layers are partition.begin(stage) onwards.
        for (int ch = 0; ch < schedule.chunks(); ++ch) {
          const int stage = schedule.layout.stage(comm.rank(), ch);
          for (int64_t l = partition.begin(stage); l < partition.end(stage); ++l) {
            const auto& layer = chunks[size_t(ch)].layers[size_t(l - partition.begin(stage))];
            const auto* fc = dynamic_cast<const nn::Linear*>(layer.get());
            grads[size_t(comm.rank())][l] = fc->weight.grad().to_vector();
          }
        }
      });
      for (size_t r = 0; r < errors.size(); ++r) {
        INFO("rank " << r << ": " << errors[r]);
        REQUIRE(errors[r].empty());
      }
      // Each layer was made once, by the rank that holds it.
      for (int64_t l = 0; l < 5; ++l) REQUIRE(calls[size_t(l)] == 1);
      int64_t total = 0;
      for (int r = 0; r < c.P; ++r) {
        total += int64_t(built[size_t(r)].size());
        REQUIRE(grads[size_t(r)].size() == built[size_t(r)].size());
      }
      REQUIRE(total == 5);
      // Every layer's gradient is one device's, bit for bit.
      for (int r = 0; r < c.P; ++r)
        for (const auto& [l, g] : grads[size_t(r)]) {
          INFO("layer " << l << " on rank " << r);
          REQUIRE(dynamic_cast<nn::Linear&>(*ref[size_t(l)]).weight.grad().to_vector() == g);
        }
    }
  }
  // A factory is called only where its layer lives: an empty one elsewhere is never touched.
  std::vector<LayerFactory> sparse(5);
  sparse[0] = [&] { return std::make_shared<nn::Linear>(4, 8, nn::LinearOptions{.init = keyed.at("0")}); };
  const Partition two = partition_uniform(5, 2);
  Partition first_alone;
  first_alone.bounds = {0, 1, 5};
  REQUIRE(build_rank_chunks(sparse, first_alone, Layout{2, 1}, 0).at(0).layers.size() == 1);
  REQUIRE_THROWS_WITH(build_rank_chunks(sparse, two, Layout{2, 1}, 0), Contains("the factory of layer 1 is empty"));
}

TEST_CASE("runtime: bad configurations are clear errors", "[pipeline][runtime]") {
  SECTION("a batch that does not split into M micro-batches") {
    REQUIRE_THROWS_WITH(split_microbatches(zeros({10, 3}), 4), Contains("10") && Contains("M=4"));
    auto parts = split_microbatches(arange(0, 12, 1, DType::f32).reshape({6, 2}), 3);
    REQUIRE(parts.size() == 3);
    test::require_equal(parts[1], arange(4, 8, 1, DType::f32).reshape({2, 2}));
  }
  SECTION("interleaved with M not a multiple of P") {
    REQUIRE_THROWS_WITH(make_schedule(ScheduleKind::interleaved, 4, 6, 2), Contains("multiple"));
  }
  SECTION("a communicator of the wrong size") {
    auto comms = comm::local_group(2);
    nn::GPT model(tiny_gpt());
    Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, 3, 3);
    REQUIRE_THROWS_WITH(whole_model_pipeline(model, partition_uniform(5, 3), schedule, *comms[0]),
                        Contains("3 ranks") && Contains("2"));
  }
  SECTION("a schedule that lists fewer ranks' actions than it has ranks") {
    // As a hand-written or CSV schedule may: refused with the executor's words before anything
    // (the list of links to connect included) reads the missing rank's actions.
    auto comms = comm::local_group(2);
    Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, 2, 2);
    schedule.actions.pop_back();
    auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
      nn::GPT model(tiny_gpt());
      Pipeline pipe = whole_model_pipeline(model, partition_uniform(5, 2), schedule, c);
    });
    for (const std::string& e : errors) REQUIRE_THAT(e, Contains("lists 1 ranks' actions for P=2"));
  }
  SECTION("the wrong number of micro-batches") {
    auto comms = comm::local_group(1);
    nn::GPT model(tiny_gpt());
    Schedule schedule = make_schedule(ScheduleKind::gpipe, 1, 4);
    Pipeline pipe = whole_model_pipeline(model, partition_uniform(5, 1), schedule, *comms[0]);
    Batch batch = make_batch(3, 1);
    REQUIRE_THROWS_WITH(pipe.forward_backward(batch.inputs, batch.targets), Contains("M=4") && Contains("3 inputs"));
  }
  SECTION("recomputation with dropout") {
    auto comms = comm::local_group(1);
    nn::GPTConfig config = tiny_gpt();
    config.dropout = 0.1;
    nn::GPT model(config);
    Schedule schedule = make_schedule(ScheduleKind::gpipe, 1, 2);
    REQUIRE_THROWS_WITH(whole_model_pipeline(model, partition_uniform(5, 1), schedule, *comms[0], recomputing()),
                        Contains("Dropout"));
  }
}

TEST_CASE("runtime: a rank that fails makes the others fail promptly, naming it", "[pipeline][runtime]") {
  const int P = 3, M = 3;
  Batch batch = make_batch(M, 51);
  Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, P, M);
  Partition partition = partition_uniform(5, P);
  auto comms = comm::local_group(P, Device::cpu(), std::chrono::milliseconds(60'000));
  auto errors = test::run_ranks(comms, [&](comm::Communicator& comm) {
    nn::GPT model(tiny_gpt());
    LossFn loss = [](const Tensor&, const Tensor&) -> Tensor { throw Error("the loss exploded"); };
    Pipeline pipe = whole_model_pipeline(model, partition, schedule, comm, {}, loss);
    pipe.forward_backward(batch.inputs, batch.targets);
  });
  REQUIRE_THAT(errors[P - 1], Contains("the loss exploded"));
  for (int r = 0; r < P - 1; ++r) {
    INFO("rank " << r);
    REQUIRE_THAT(errors[size_t(r)], Contains("pipeline rank 2 failed"));
  }
}

TEST_CASE("runtime: the trace holds every compute action of every rank", "[pipeline][runtime]") {
  const int P = 2, M = 4;
  Batch batch = make_batch(M, 61);
  Schedule schedule = make_schedule(ScheduleKind::zb_h1, P, M);
  Partition partition = partition_uniform(5, P);
  auto comms = comm::local_group(P);
  std::vector<Trace> traces(P);
  auto errors = test::run_ranks(comms, [&](comm::Communicator& comm) {
    nn::GPT model(tiny_gpt());
    Pipeline pipe = whole_model_pipeline(model, partition, schedule, comm, tracing({}));
    pipe.forward_backward(batch.inputs, batch.targets);
    traces[size_t(comm.rank())] = pipe.last_trace();
  });
  for (const std::string& e : errors) REQUIRE(e.empty());
  for (const Trace& t : traces) {
    REQUIRE(t.ranks == P);
    REQUIRE(t.events.size() == traces[0].events.size());  // every rank gathered everything
    size_t total = 0;
    for (const auto& list : schedule.actions) total += list.size();
    REQUIRE(t.events.size() == total);
    for (const TraceEvent& e : t.events) {
      REQUIRE(e.start >= 0);
      REQUIRE(e.end >= e.start);
    }
  }
}
