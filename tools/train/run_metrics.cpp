#include "run_metrics.h"

#include <algorithm>

#include "core/factory.h"
#include "core/stream.h"
#include "loss_curve.h"

namespace brigade::train {

std::vector<double> gather_per_rank(Trainer& trainer, const pipeline::PipelineGroups* groups, double mine) {
  if (groups == nullptr) return {mine};
  comm::Communicator& comm = *groups->pipeline;
  std::vector<double> values(size_t(comm.size()), 0.0);
  values[size_t(comm.rank())] = mine;
  // Each rank fills its own entry of a sum; on the devices the communicator moves (a GPU's, for NCCL).
  Tensor t = from_vector(values, {int64_t(values.size())}, DType::f64).to(trainer.model().config().device);
  comm.all_reduce(t);
  return t.to(Device::cpu()).to_vector();
}

RunMetrics::RunMetrics(Trainer& trainer, const pipeline::PipelineGroups* groups, const MemoryAccount& memory,
                       Clock::time_point run_start)
    : trainer_(trainer), groups_(groups), memory_(memory), run_start_(run_start),
      enabled_(!trainer.options().metrics.empty()) {
  if (enabled_ && trainer.is_leader()) log_ = std::make_unique<MetricsLog>(trainer.options().metrics, trainer.step());
}

void RunMetrics::keep_peak() { kept_peak_ = std::max(kept_peak_, double(memory_.peak())); }

void RunMetrics::record(MetricsRecord record) {
  if (!enabled_) return;
  // This rank's own account (host memory on the CPU, GPU memory on a GPU), not the process's or the
  // device's: rank threads share both.
  const double mine = std::max(kept_peak_, double(memory_.peak()));
  record.peak_memory_bytes = gather_per_rank(trainer_, groups_, mine);  // every rank, whatever comes next
  if (!log_) return;
  if (record.kind == MetricsRecord::Kind::validation && log_->has_validation(record.step)) return;
  record.elapsed_s = std::chrono::duration<double>(Clock::now() - run_start_).count();
  record.time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  log_->append(record);
}

void RunMetrics::finish(std::ostream& out) {
  const std::string& path = trainer_.options().curves;
  if (!log_ || path.empty() || path == "none") return;
  save_loss_curve(path, log_->records());
  out << "loss curves: " << path << " (from " << log_->path() << "; redraw: brigade curves --metrics " << log_->path()
      << " --out " << path << ")\n";
}

}  // namespace brigade::train
