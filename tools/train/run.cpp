// The whole `brigade train` run around a Trainer: one rank's training loop, and the ranks of a
// pipeline started as threads of this process or joined as processes of a launch. What the loop
// reports lives in loop_reports.h, what the run prints around it in run_report.h.
#include "trainer.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <thread>

#include "checkpoint_dir.h"
#include "comm/comm.h"
#include "core/error.h"
#include "core/memory_account.h"
#include "core/parallel.h"
#include "core/stream.h"
#include "device_memory.h"
#include "loop_reports.h"
#include "run_metrics.h"
#include "run_report.h"
#include "text_task.h"
#include "tools/cli/matmul_choice.h"

namespace brigade::train {

// Fails before training rather than after it when the checkpoint could never be written.
void check_save_path(const std::string& path) {
  if (path.empty()) return;
  if (is_checkpoint_dir(path)) return make_checkpoint_dir(path);
  // Checkpoints are directories now: an older build's single file at PATH would fail the first save,
  // after training. It still resumes (--resume PATH); the new checkpoint needs a path of its own.
  BRIGADE_CHECK(!std::filesystem::is_regular_file(path), "--save ", path, ": a file is in the way (a single-file "
                "checkpoint of an older brigade? it still resumes with --resume ", path, "; save to another path)");
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  BRIGADE_CHECK(std::filesystem::is_directory(dir), "--save ", path, ": the directory ", dir.string(),
                " does not exist");
}

namespace {

// The loop every rank runs; only the leader's `out` is a real stream.
TrainSummary train_rank(const TrainOptions& options, const pipeline::PipelineGroups* groups, std::ostream& out) {
  const auto run_start = Clock::now();
  // The memory this rank holds, apart from the other ranks that are threads of this process: host
  // memory on the CPU, GPU memory (the caching allocator's blocks) on a GPU. The pipeline's memory
  // report compares the run device's peak with the prediction, --metrics records it.
  const auto host_memory = std::make_shared<MemoryAccount>(), device_memory = std::make_shared<MemoryAccount>();
  const HostMemoryScope host_charged_to_this_rank(host_memory);
  const DeviceMemoryScope device_charged_to_this_rank(device_memory);
  const bool save_dir = is_checkpoint_dir(options.save);  // before any rank can have saved
  Trainer trainer(options, groups);
  MemoryAccount& memory = trainer.model().config().device.is_cuda() ? *device_memory : *host_memory;
  const MemoryContextScope out_of_memory_says = register_memory_context(trainer, groups);
  print_header(trainer, out);
  print_resume(trainer, out);
  out.flush();

  RunMetrics metrics(trainer, groups, memory, run_start);
  const MfuBasis mfu = measure_mfu_basis(trainer, out);
  memory.reset_peak();  // the peak MFU's measured GEMM reached is not the run's memory
  TrainSummary summary;
  const Validation validation = start_validation(trainer, metrics, summary, out);
  Progress progress(trainer, mfu);
  double last_step_peak = 0;
  while (trainer.step() < options.steps) {
    const bool last = trainer.step() + 1 == options.steps;
    if (last) {  // the last step's timeline, and its memory
      trainer.set_trace(true);
      metrics.keep_peak();
      memory.reset_peak();
    }
    progress.add(trainer.train_step());  // batch, forward, backward, optimizer
    if (last) last_step_peak = double(memory.peak());
    report_progress(progress, trainer, metrics, out);
    maybe_validate(validation, trainer, metrics, summary, out);
    maybe_checkpoint(trainer, out, save_dir);
  }
  const double train_seconds = seconds_since(progress.train_start);

  // The timeline's memory report compares each rank's peak on the run's device with the prediction.
  if (trainer.pipelined() && trainer.step() > progress.start_step)
    report_timeline(trainer, out, gather_per_rank(trainer, groups, last_step_peak));
  metrics.finish(out);
  if (!options.save.empty()) save_checkpoint(trainer, out, save_dir);

  summary.steps = trainer.step();
  summary.first_loss = trainer.first_loss();
  summary.last_loss = progress.tail_mean();
  if (dynamic_cast<const TextTask*>(&trainer.task()) == nullptr) summary.accuracy = trainer.evaluate(options.eval_examples);
  print_summary(trainer, progress, summary, run_start, train_seconds, out);
  return summary;
}

// An output stream that drops everything: what the ranks other than the leader print to.
std::ostream& null_stream() {
  static std::ofstream sink;  // never opened: every write fails silently
  return sink;
}

}  // namespace

TrainSummary run_training(const TrainOptions& options_in, std::ostream& out) {
  TrainOptions options = options_in;
  check_save_path(options.save);
  if (options.threads > 0) set_num_threads(options.threads);
  // --matmul for every matmul of the run: process-wide, set before any rank thread starts, and the
  // previous backend restored when the run ends. check_combination has refused a backend the GPU
  // cannot run; the CPU has one GEMM and ignores the choice.
  const cli::ScopedMatmulBackend matmul(options.matmul);
  // The one check that the device can be used here (the Trainer takes --device as it is).
  const Device device = cli::usable_device(options.device);
  if (options.stages == 0) {
    apply_memory_limit(options, device);
    return train_rank(options, nullptr, out);
  }

  const int P = int(options.stages);
  const comm::LaunchEnv env = comm::read_launch_env();
  if (env.world_size > 1) {
    // Started by `brigade launch -n N` (or torchrun, srun): this process is one rank of N = P * R.
    BRIGADE_CHECK(env.world_size % P == 0, "brigade train: ", env.world_size, " processes cannot form pipelines of --stages ",
                  P, " (the number of processes must be a multiple of the number of stages)");
    const int64_t R = env.world_size / P;
    BRIGADE_CHECK(options_in.replicas == 1 || options_in.replicas == R, "brigade train: --replicas ", options_in.replicas,
                  " disagrees with ", env.world_size, " processes / ", P, " stages = ", R);
    options.replicas = R;
    BRIGADE_CHECK(options.batch % (R * options.microbatches) == 0, "brigade train: a batch of ", options.batch,
                  " does not split into ", R, " replicas x ", options.microbatches, " micro-batches");
    comm::ConnectOptions connect;
    connect.device = device.is_cuda() ? comm::local_device(env) : Device::cpu();
    apply_memory_limit(options, connect.device);
    auto world = comm::connect(env, connect);
    auto groups = pipeline::PipelineGroups::split(*world, P);
    const bool leader = world->rank() == 0;
    return train_rank(options, groups.get(), leader ? out : null_stream());
  }

  // One process: every rank a thread, on the GPU each with its own stream (comm/local_ranks.h); a
  // failing rank stops the others, and its own error is the one reported.
  const int world_size = int(P * options.replicas);
  apply_memory_limit(options, device);
  auto world = comm::local_group(std::vector<Device>(size_t(world_size), device));
  const std::vector<TrainSummary> summaries = comm::run_local_ranks(world, [&](comm::Communicator& rank) {
    auto groups = pipeline::PipelineGroups::split(rank, P);
    return train_rank(options, groups.get(), rank.rank() == 0 ? out : null_stream());
  });
  return summaries[0];  // the leader's, which printed the run
}

}  // namespace brigade::train
