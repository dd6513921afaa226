// A pipeline built by hand: a model of your own cut into two stages, each stage a thread, trained with
// the 1F1B schedule — and the same model trained on one device, step for step, for comparison.
//
// Shows what `brigade train` does for a GPT, with nothing hidden: the model as a list of
// one-tensor-in, one-tensor-out layers (pipeline/partition.h), each made by a factory that only the
// rank holding the layer calls (build_rank_chunks, pipeline/gpt_stages.h) — no rank builds another's
// layers — each rank's Chunk of them (pipeline/stage.h), a Schedule (pipeline/schedule.h), local
// communicators that make threads ranks (comm/local.h, run by comm/local_ranks.h), and
// Pipeline::forward_backward (pipeline/runtime.h) for one training step.
//
// Every layer draws its weights by name (nn::Init::keyed: each parameter from the Philox stream of
// the seed and its name, "1.up.weight"), so a layer starts from the same values whichever rank
// builds it and whatever else that rank builds — the same as the one-device model's.
//
// What the pipeline computes is the gradient of the mean loss over the micro-batches — exactly what
// one device computes by running the micro-batches one after another, each backward seeded with 1/M.
// On the CPU it runs the same kernels in the same order, so the losses and the trained weights are
// required to be bitwise equal (tolerance 0).
//
// Build and run it against an installed brigade (`meson install -C build`):
//   c++ -std=c++20 -O2 examples/pipeline_two_stages.cpp $(pkg-config --cflags --libs brigade) -o pipeline_two_stages
//   ./pipeline_two_stages
// or in the tree: ninja -C build examples/pipeline_two_stages && build/examples/pipeline_two_stages
// It exits 1 if the pipeline's losses or weights differ from one device's in any bit.
#include <brigade.h>
#include <comm/local.h>        // local_group: ranks that are threads of this process
#include <comm/local_ranks.h>  // run_local_ranks: a function run on every rank, each on a thread

#include <cstdio>

using namespace brigade;
using namespace brigade::pipeline;

namespace {

constexpr int kStages = 2, kMicrobatches = 4, kSteps = 5;

// A layer of our own: x + W2 gelu(W1 x). Any one-tensor module can be a pipeline layer. Its children
// get the Init extended by their own names (init.at("up")), so that drawn by name each parameter
// has a stream of its own ("1.up.weight", "1.down.weight").
struct ResidualMLP : nn::Module {
  std::shared_ptr<nn::Linear> up, down;
  ResidualMLP(int64_t dim, const nn::Init& init) {
    up = register_module("up", std::make_shared<nn::Linear>(dim, 2 * dim, nn::LinearOptions{.init = init.at("up")}));
    down = register_module("down", std::make_shared<nn::Linear>(2 * dim, dim, nn::LinearOptions{.init = init.at("down")}));
  }
  std::string name() const override { return "ResidualMLP"; }
  Tensor forward(const Tensor& x) override { return x + (*down)(gelu((*up)(x))); }
};

// The model as one factory per layer. Layer i is named "i" (as in an nn::Sequential of them), and its
// weights are drawn by that name from seed 7: the same wherever and whenever the factory runs.
// `made` counts the calls, so the example can show that each rank made only its own layers.
std::vector<LayerFactory> model_factories(std::vector<int>& made) {
  const nn::Init init = nn::Init::keyed(7);
  auto counted = [&made](size_t i, LayerFactory make) -> LayerFactory {
    return [&made, i, make] {
      ++made[i];
      return make();
    };
  };
  return {counted(0, [=] { return std::make_shared<nn::Linear>(4, 16, nn::LinearOptions{.init = init.at("0")}); }),
          counted(1, [=] { return std::make_shared<ResidualMLP>(16, init.at("1")); }),
          counted(2, [=] { return std::make_shared<ResidualMLP>(16, init.at("2")); }),
          counted(3, [=] { return std::make_shared<nn::Linear>(16, 1, nn::LinearOptions{.init = init.at("3")}); })};
}
// Stage s holds layers [bounds[s], bounds[s + 1]): two each.
Partition two_stages() {
  Partition p;
  p.bounds = {0, 2, 4};
  return p;
}

Tensor mse(const Tensor& output, const Tensor& target) {
  Tensor err = output - target;
  return mean(err * err);
}

struct Run {
  std::vector<double> losses;     // every micro-batch's loss, step after step
  std::vector<Tensor> weights;    // every parameter after training, layer by layer
  std::vector<int> made = std::vector<int>(4, 0);  // how often each layer's factory ran here
};

void train_one_device(const std::vector<Tensor>& xs, const std::vector<Tensor>& ys, Run& run) {
  nn::Sequential model;
  for (const LayerFactory& make : model_factories(run.made)) model.push_back(make());
  optim::AdamW opt(model.named_parameters(), {.lr = 1e-2});
  for (int step = 0; step < kSteps; ++step) {
    for (int m = 0; m < kMicrobatches; ++m) {
      Tape tape;
      Tensor loss = tape.record([&] { return mse(model(xs[size_t(m)]), ys[size_t(m)]); });
      tape.backward({loss}, {full(loss.shape(), 1.0 / kMicrobatches)});  // gradients add up over m
      run.losses.push_back(loss.item());
    }
    opt.step();
    opt.zero_grad();
  }
  run.weights = model.parameters();
}

// Rank `comm.rank()` of the pipeline: it builds its stage's layers (only those) and trains them.
void train_stage(comm::Communicator& comm, const std::vector<Tensor>& xs, const std::vector<Tensor>& ys, Run& run) {
  const int rank = comm.rank();
  const Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, kStages, kMicrobatches);
  const std::vector<Chunk> chunks = build_rank_chunks(model_factories(run.made), two_stages(), schedule.layout, rank);

  PipelineGroups groups;
  groups.pipeline = &comm;
  Pipeline pipe(groups, schedule, chunks, mse);
  optim::AdamW opt(pipe.named_parameters(), {.lr = 1e-2});  // each rank steps its own parameters
  for (int step = 0; step < kSteps; ++step) {
    // The first stage needs the inputs, the last the targets; a rank passes empty lists otherwise.
    StepStats stats = pipe.forward_backward(rank == 0 ? xs : std::vector<Tensor>{},
                                            rank == kStages - 1 ? ys : std::vector<Tensor>{});
    opt.step();
    opt.zero_grad();
    // Every rank gets the micro-batch losses, not only the last stage.
    run.losses.insert(run.losses.end(), stats.microbatch_losses.begin(), stats.microbatch_losses.end());
  }
  for (auto& layer : chunks[0].layers)
    for (const Tensor& p : layer->parameters()) run.weights.push_back(p);
}

bool bitwise_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].to_vector() != b[i].to_vector()) return false;
  return true;
}

}  // namespace

int main() {
  try {
    // 4 micro-batches of 8 examples: learn y = x0 * x1 + x2 - x3.
    Generator gen(1);
    Tensor x = randn({kMicrobatches * 8, 4}, DType::f32, Device::cpu(), &gen);
    Tensor y = x.slice(1, 0, 1) * x.slice(1, 1, 2) + x.slice(1, 2, 3) - x.slice(1, 3, 4);
    const std::vector<Tensor> xs = split_microbatches(x, kMicrobatches), ys = split_microbatches(y, kMicrobatches);

    Run reference;
    train_one_device(xs, ys, reference);

    // Each stage a thread (comm/local_ranks.h); if one fails, the other is stopped at once and the
    // failing rank's error is thrown here.
    std::vector<Run> ranks(kStages);
    auto comms = comm::local_group(kStages);
    comm::run_local_ranks(comms,
                          [&](comm::Communicator& comm) { train_stage(comm, xs, ys, ranks[size_t(comm.rank())]); });
    Run pipelined{ranks[0].losses, {}};
    for (const Run& rank : ranks)
      pipelined.weights.insert(pipelined.weights.end(), rank.weights.begin(), rank.weights.end());

    for (int step = 0; step < kSteps; ++step) {
      auto step_loss = [step](const Run& run) {  // the step's loss: the mean over its micro-batches
        double sum = 0;
        for (int m = 0; m < kMicrobatches; ++m) sum += run.losses.at(size_t(step * kMicrobatches + m));
        return sum / kMicrobatches;
      };
      std::printf("step %d  loss %.6f on one device, %.6f pipelined\n", step, step_loss(reference),
                  step_loss(pipelined));
    }
    const bool same_losses = pipelined.losses == reference.losses && ranks[1].losses == reference.losses;
    const bool same_weights = bitwise_equal(pipelined.weights, reference.weights);
    // Rank r made exactly the layers of its stage, each once: layers 0-1 on rank 0, 2-3 on rank 1.
    const bool only_own =
        ranks[0].made == std::vector<int>{1, 1, 0, 0} && ranks[1].made == std::vector<int>{0, 0, 1, 1};
    std::printf("losses %s, trained weights %s; rank 0 built layers 0-1, rank 1 layers 2-3: %s\n",
                same_losses ? "bitwise equal" : "DIFFER", same_weights ? "bitwise equal" : "DIFFER",
                only_own ? "yes" : "NO");
    return same_losses && same_weights && only_own ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipeline_two_stages: %s\n", e.what());
    return 1;
  }
}
