#include "memory_report.h"

#include <cstdio>

#include "comm/comm.h"
#include "core/error.h"
#include "core/format.h"
#include "pipeline/gpt_stages.h"
#include "pipeline/partition.h"

namespace brigade::train {


pipeline::MemoryModel memory_model(Trainer& trainer, const pipeline::Trace& trace) {
  const pipeline::Schedule& schedule = trainer.schedule();
  const std::vector<LayerBytes>& layers = trainer.layer_bytes();
  BRIGADE_CHECK(int64_t(layers.size()) == trainer.layer_count(), "memory report: the layer sizes are world rank 0's");
  const std::vector<pipeline::MeasuredStageMemory> measured = pipeline::stage_memory({trace}, schedule.layout);
  pipeline::MemoryModel model;
  const TrainOptions& o = trainer.options();
  const int64_t rows = o.batch / o.replicas / o.microbatches;  // one micro-batch
  const nn::GPTConfig& config = trainer.model().config();
  const Device device = config.device;
  const int64_t boundary = allocated_bytes(device, size_t(rows * trainer.task().sequence_length() * config.n_embd) *
                                                       dtype_size(config.compute_dtype.value_or(config.dtype)));
  const bool processes = comm::read_launch_env().world_size > 1;
  const pipeline::Partition& partition = trainer.partition();
  const int64_t last = partition.layers() - 1;
  const int embed_stage = int(partition.stage_of_layer(0)), head_stage = int(partition.stage_of_layer(last));
  // A rank holding the embedding and the head holds their token table once, in one stage or two (a
  // V-shaped layout, zb-v and dualpipev, puts both ends on rank 0): the head's stage does not count it again.
  const bool tied_once = last > 0 && schedule.layout.rank_of(embed_stage) == schedule.layout.rank_of(head_stage);
  for (int s = 0; s < schedule.stages(); ++s) {
    pipeline::StageMemory m;
    for (int64_t i = partition.begin(s); i < partition.end(s); ++i) {
      m.parameters += layers[size_t(i)].parameters;
      m.gradients += layers[size_t(i)].gradients;
      m.optimizer += layers[size_t(i)].optimizer;
    }
    if (tied_once && s == head_stage) {
      m.parameters -= trainer.tied_bytes().parameters;
      m.gradients -= trainer.tied_bytes().gradients;
      m.optimizer -= trainer.tied_bytes().optimizer;
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
  // Every rank holds its own layers only (counted above), and the step's batch (inputs and
  // targets), which every rank builds.
  const Batch batch = trainer.task().train_batch(0, o.batch / o.replicas);
  const int64_t batch_bytes =
      allocated_bytes(device, batch.inputs.storage().nbytes()) + allocated_bytes(device, batch.targets.storage().nbytes());
  for (int r = 0; r < schedule.ranks(); ++r) model.resident.push_back(batch_bytes);
  return model;
}

std::vector<double> report_memory(Trainer& trainer, const pipeline::Trace& trace,
                                  const pipeline::SimulationResult& simulated,
                                  const std::vector<double>& measured_peaks, std::ostream& out) {
  const pipeline::Schedule& schedule = trainer.schedule();
  BRIGADE_CHECK(int(measured_peaks.size()) == schedule.ranks(), "report_memory: ", measured_peaks.size(),
                " measured peaks for ", schedule.ranks(), " ranks");
  const pipeline::MemoryModel model = memory_model(trainer, trace);
  const std::vector<LayerBytes>& layers = trainer.layer_bytes();
  const std::vector<pipeline::RankMemory> predicted = pipeline::predict_memory(schedule, model, &simulated);
  out << "memory (last step, " << (trainer.model().config().device.is_cuda() ? "device" : "host") << "), predicted peak (held all step + gradients + stashed activations + workspace) "
         "vs measured; the parameters each rank trains:\n";
  std::vector<double> ratios;
  for (int r = 0; r < schedule.ranks(); ++r) {
    const pipeline::RankMemory& p = predicted[size_t(r)];
    const double ratio = p.peak > 0 ? measured_peaks[size_t(r)] / double(p.peak) : 0.0;
    ratios.push_back(ratio);
    // Its stages' parameters, each tensor once (a rank holding the embedding and the head holds
    // their tied table once).
    int64_t count = 0, bytes = 0;
    const std::vector<int64_t> mine = pipeline::rank_layers(trainer.partition(), schedule.layout, r);
    for (int64_t i : mine) {
      count += layers[size_t(i)].elements;
      bytes += layers[size_t(i)].nbytes;
    }
    if (mine.size() > 1 && mine.front() == 0 && mine.back() == trainer.layer_count() - 1) {
      count -= trainer.tied_bytes().elements;
      bytes -= trainer.tied_bytes().nbytes;
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
