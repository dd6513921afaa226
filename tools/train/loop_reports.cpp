#include "loop_reports.h"

#include <cmath>
#include <numeric>

#include "checkpoint_dir.h"
#include "comm/comm.h"
#include "core/format.h"
#include "progress.h"
#include "text_task.h"

namespace brigade::train {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string signed_fixed(double v, int decimals) { return (std::signbit(v) ? "" : "+") + format_fixed(v, decimals); }

MfuBasis measure_mfu_basis(Trainer& trainer, std::ostream& out) {
  MfuBasis mfu;
  // The devices a run's ranks share: one when every rank is a thread on one device (the CPU's cores
  // or one GPU's streams); under `brigade launch`, one per process (each its own GPU or CPU).
  const int world = comm::read_launch_env().world_size;
  mfu.devices = world > 1 ? double(world) : 1.0;
  if (dynamic_cast<const TextTask*>(&trainer.task()) == nullptr || !trainer.is_leader()) return mfu;
  const nn::GPTConfig& config = trainer.model().config();
  mfu.peak = device_peak(config.device, config.compute_dtype.value_or(config.dtype));
  mfu.flops_per_token = training_flops_per_token(trainer.model());
  out << "mfu: " << format_significant(mfu.flops_per_token / 1e9, 3) << " GFLOP per token (6N + 12LCT), peak "
      << format_significant(mfu.peak.flops_per_second / 1e9, 4) << " GFLOP/s: " << mfu.peak.source << "\n";
  return mfu;
}

Progress::Progress(const Trainer& trainer, const MfuBasis& mfu_basis)
    : mfu(mfu_basis),
      start_step(trainer.step()),
      tokens_per_step(trainer.options().batch * trainer.task().sequence_length()),
      window_start(Clock::now()),
      train_start(window_start) {}

void Progress::add(double loss) {
  window_loss += loss;
  ++window_steps;
  tail.push_back(loss);
  if (tail.size() > tail_steps) tail.pop_front();
}

double Progress::tail_mean() const {
  if (tail.empty()) return std::nan("");
  return std::accumulate(tail.begin(), tail.end(), 0.0) / double(tail.size());
}

void report_progress(Progress& p, Trainer& trainer, RunMetrics& metrics, std::ostream& out) {
  const TrainOptions& o = trainer.options();
  const int64_t step = trainer.step();
  if (step % o.log_every != 0 && step != o.steps) return;
  const double seconds_per_step = seconds_since(p.train_start) / double(step - p.start_step);
  StepReport report;
  report.step = step;
  report.steps = o.steps;
  report.loss = p.window_loss / double(p.window_steps);
  report.lr = trainer.lr_at(step - 1);
  report.tokens_per_second = double(p.window_steps * p.tokens_per_step) / seconds_since(p.window_start);
  report.eta_seconds = seconds_per_step * double(o.steps - step);
  // Every rank of a pipeline (or replica) shares the device's peak, so the run's MFU divides by all
  // of them: on one GPU the ranks are streams of that GPU, and they are counted once.
  if (p.mfu.peak.flops_per_second > 0)
    report.mfu = report.tokens_per_second * p.mfu.flops_per_token / (p.mfu.peak.flops_per_second * p.mfu.devices);
  out << format_step(report) << "\n";
  out.flush();

  MetricsRecord record;
  record.step = step;
  record.loss = report.loss;
  record.lr = report.lr;
  record.tokens_per_second = report.tokens_per_second;
  if (report.mfu >= 0) record.mfu = report.mfu;
  metrics.record(record);

  p.window_loss = 0;
  p.window_steps = 0;
  p.window_start = Clock::now();
}

namespace {

// "validation loss 5.1234 at step 200 (-12.3% since the first measurement)": every rank calls it (the
// leader gathers the model in a pipeline); the leader prints.
double measure_validation(Trainer& trainer, RunMetrics& metrics, std::ostream& out, const double* first) {
  const double loss = trainer.validation_loss(trainer.options().eval_examples);
  const int64_t step = trainer.step();
  if (trainer.is_leader()) {
    out << "validation loss " << format_fixed(loss, 4) << " at step " << step;
    if (first != nullptr && step > 0) {
      const double change = 100.0 * (loss - *first) / *first;
      out << " (" << signed_fixed(change, 1) << "% since the first measurement)";
    }
    out << "\n";
    out.flush();
  }
  MetricsRecord record;
  record.kind = MetricsRecord::Kind::validation;
  record.step = step;
  record.validation_loss = loss;
  metrics.record(record);
  return loss;
}

}  // namespace

Validation start_validation(Trainer& trainer, RunMetrics& metrics, TrainSummary& summary, std::ostream& out) {
  Validation v;
  const auto* lm = dynamic_cast<const TextTask*>(&trainer.task());
  if (lm == nullptr) return v;
  const TrainOptions& o = trainer.options();
  if (lm->validation() == nullptr) {
    out << "no validation shards in " << o.data << ": no validation loss\n";
    return v;
  }
  v.enabled = true;
  v.every = o.eval_every > 0 ? o.eval_every : 5 * o.log_every;
  v.first = measure_validation(trainer, metrics, out, nullptr);
  summary.validation.emplace_back(trainer.step(), v.first);
  return v;
}

void maybe_validate(const Validation& v, Trainer& trainer, RunMetrics& metrics, TrainSummary& summary,
                    std::ostream& out) {
  const int64_t step = trainer.step();
  if (!v.enabled || (step % v.every != 0 && step != trainer.options().steps)) return;
  summary.validation.emplace_back(step, measure_validation(trainer, metrics, out, &v.first));
}

void save_checkpoint(Trainer& trainer, std::ostream& out, bool save_dir) {
  const TrainOptions& o = trainer.options();
  const std::string path = save_dir ? checkpoint_path(o.save, trainer.step()) : o.save;
  trainer.save(path);
  // In a --save directory the leader deletes the checkpoints beyond --keep once the new one is complete.
  if (save_dir && trainer.is_leader()) prune_checkpoints(o.save, trainer.step(), o.keep);
  out << "saved " << path << " at step " << trainer.step() << "\n";
  out.flush();  // a launcher's log (or a test) watching for checkpoints sees it now, not steps later
}

void maybe_checkpoint(Trainer& trainer, std::ostream& out, bool save_dir) {
  const TrainOptions& o = trainer.options();
  if (o.save_every > 0 && trainer.step() % o.save_every == 0 && trainer.step() < o.steps)
    save_checkpoint(trainer, out, save_dir);
}

}  // namespace brigade::train
