#include "memory_report.h"

#include <cstdio>
#include <set>

#include "comm/comm.h"
#include "core/error.h"
#include "core/format.h"
#include "pipeline/partition.h"

namespace brigade::train {

namespace {

// What the CPU allocator hands out for `t`'s bytes: rounded up to 64 (core/storage.cpp).
int64_t allocated_bytes(size_t nbytes) { return int64_t(std::max<size_t>((nbytes + 63) / 64 * 64, 64)); }

// Each distinct parameter tensor once (a tied weight appears in two layers of one model).
std::vector<Tensor> distinct_parameters(const pipeline::Layers& layers) {
  std::vector<Tensor> out;
  std::set<const void*> seen;
  for (const auto& layer : layers)
    for (const Tensor& p : layer->parameters())
      if (seen.insert(p.storage().data()).second) out.push_back(p);
  return out;
}

int64_t parameter_bytes(const std::vector<Tensor>& params) {
  int64_t total = 0;
  for (const Tensor& p : params) total += allocated_bytes(p.storage().nbytes());
  return total;
}

}  // namespace

pipeline::MemoryModel memory_model(Trainer& trainer, const pipeline::Trace& trace) {
  const pipeline::Schedule& schedule = trainer.schedule();
  const pipeline::Layers layers = trainer.layers();
  const std::vector<pipeline::MeasuredStageMemory> measured = pipeline::stage_memory({trace}, schedule.layout);
  pipeline::MemoryModel model;
  const TrainOptions& o = trainer.options();
  const int64_t rows = o.batch / o.replicas / o.microbatches;  // one micro-batch
  const int64_t boundary = allocated_bytes(size_t(rows * trainer.task().sequence_length() *
                                                  trainer.model().config().n_embd) *
                                           dtype_size(trainer.model().config().compute_dtype.value_or(trainer.model().config().dtype)));
  const bool processes = comm::read_launch_env().world_size > 1;
  for (int s = 0; s < schedule.stages(); ++s) {
    pipeline::StageMemory m;
    for (const Tensor& p : distinct_parameters(pipeline::stage_layers(layers, trainer.partition(), s))) {
      const int64_t bytes = allocated_bytes(p.storage().nbytes());
      m.parameters += bytes;
      if (p.requires_grad()) {
        m.gradients += bytes;
        // AdamW's two moments, f32 like the parameter here (bf16 runs keep f32 master weights).
        m.optimizer += 2 * allocated_bytes(size_t(p.numel()) * 4);
      }
    }
    // Messages: the executor receives a gradient into a buffer of its own (its shape is known in
    // advance); an activation arrives as the sender's tensor between threads, as a new one between
    // processes.
    if (s + 1 < schedule.stages()) m.gradient_in = boundary;
    if (s > 0 && processes) m.activation_in = boundary;
    if (s > 0 && !processes) m.gradient_out = boundary;  // the threads' transport passes the tensor itself
    m.activations = int64_t(measured[size_t(s)].activations);
    m.deferred = int64_t(measured[size_t(s)].deferred);
    m.workspace = int64_t(measured[size_t(s)].workspace);
    model.stages.push_back(m);
  }
  // Every rank holds the whole model: what its stages do not use is resident all the same. So is
  // the step's batch (inputs and targets), which every rank builds.
  const int64_t whole = parameter_bytes(distinct_parameters(layers));
  const Batch batch = trainer.task().train_batch(0, o.batch / o.replicas);
  const int64_t batch_bytes =
      allocated_bytes(batch.inputs.storage().nbytes()) + allocated_bytes(batch.targets.storage().nbytes());
  for (int r = 0; r < schedule.ranks(); ++r) {
    pipeline::Layers mine;
    for (int c = 0; c < schedule.chunks(); ++c) {
      const pipeline::Layers stage = pipeline::stage_layers(layers, trainer.partition(), schedule.layout.stage(r, c));
      mine.insert(mine.end(), stage.begin(), stage.end());
    }
    model.resident.push_back(whole - parameter_bytes(distinct_parameters(mine)) + batch_bytes);
  }
  return model;
}

std::vector<double> report_memory(Trainer& trainer, const pipeline::Trace& trace,
                                  const pipeline::SimulationResult& simulated,
                                  const std::vector<double>& measured_peaks, std::ostream& out) {
  const pipeline::Schedule& schedule = trainer.schedule();
  BRIGADE_CHECK(int(measured_peaks.size()) == schedule.ranks(), "report_memory: ", measured_peaks.size(),
                " measured peaks for ", schedule.ranks(), " ranks");
  const pipeline::MemoryModel model = memory_model(trainer, trace);
  const pipeline::Layers layers = trainer.layers();
  const std::vector<pipeline::RankMemory> predicted = pipeline::predict_memory(schedule, model, &simulated);
  out << "memory (last step, host), predicted peak (held all step + gradients + stashed activations + workspace) "
         "vs measured; the parameters each rank trains:\n";
  std::vector<double> ratios;
  for (int r = 0; r < schedule.ranks(); ++r) {
    const pipeline::RankMemory& p = predicted[size_t(r)];
    const double ratio = p.peak > 0 ? measured_peaks[size_t(r)] / double(p.peak) : 0.0;
    ratios.push_back(ratio);
    // Its stages' parameters, each tensor once (a tied weight is held by both stages that use it).
    pipeline::Layers mine;
    for (int c = 0; c < schedule.chunks(); ++c) {
      const pipeline::Layers stage = pipeline::stage_layers(layers, trainer.partition(), schedule.layout.stage(r, c));
      mine.insert(mine.end(), stage.begin(), stage.end());
    }
    int64_t count = 0, bytes = 0;
    for (const Tensor& t : distinct_parameters(mine)) {
      count += t.numel();
      bytes += int64_t(t.storage().nbytes());
    }
    char line[400];
    std::snprintf(line, sizeof line,
                  "  rank %d: predicted %s (%s + %s + %s + %s), measured %s, measured/predicted %.3f; %s parameters (%s)\n",
                  r, format_bytes(double(p.peak)).c_str(), format_bytes(double(p.states)).c_str(),
                  format_bytes(double(p.gradients)).c_str(), format_bytes(double(p.activations)).c_str(),
                  format_bytes(double(p.workspace)).c_str(), format_bytes(measured_peaks[size_t(r)]).c_str(), ratio,
                  with_commas(count).c_str(), format_bytes(double(bytes)).c_str());
    out << line;
  }
  return ratios;
}

}  // namespace brigade::train
