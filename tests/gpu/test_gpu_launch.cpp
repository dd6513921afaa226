// `brigade launch -n 4 -- brigade train --device cuda --stages 4`: four processes, one GPU and one
// pipeline stage each, NCCL between them — with every schedule. Each run's losses must fall and
// match the same training on the CPU (one process, rank threads) within f32's (or bf16's) rounding.
// On the emulator each process has four emulated GPUs (BRIGADE_EMULATED_GPUS=4) and the emulated
// NCCL; on a machine with fewer GPUs than ranks it needs NCCL's several-ranks-per-GPU support.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "brigade.h"
#include "comm/nccl.h"
#include "../comm/run_command.h"
#include "../temp_dir.h"

using namespace brigade;

namespace {

// The values of every "loss=" on the lines of `text` (one per logged step).
std::vector<double> losses(const std::string& text) {
  std::vector<double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(" loss=");
    if (at != std::string::npos) out.push_back(std::stod(line.substr(at + 6)));
  }
  return out;
}

// peak_memory_bytes of the last record of a --metrics file (tools/train/metrics.h): one per rank.
std::vector<double> last_peaks(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  std::vector<double> peaks;
  const std::string key = "\"peak_memory_bytes\":[";
  const size_t at = last.find(key);
  if (at == std::string::npos) return peaks;
  std::istringstream values(last.substr(at + key.size(), last.find(']', at) - at - key.size()));
  for (std::string value; std::getline(values, value, ',');) peaks.push_back(std::stod(value));
  return peaks;
}

}  // namespace

TEST_CASE("gpu launch: four processes train over NCCL with every schedule, as the CPU does", "[gpu][launch][nccl]") {
  if (cuda_device_count() < 4 && !comm::nccl_multi_rank_per_gpu()) {
    WARN(cuda_device_count() << " GPU(s) and NCCL " << comm::nccl_version()
                             << " < 2.30.3: four ranks cannot share them; nothing to run");
    return;
  }
  struct Run {
    const char* flags;
    const char* precision;
    double tolerance;  // on each logged loss (printed with 4 decimals)
  };
  const std::string model = " --batch 8 --microbatches 4 --steps 6 --heads 2 --embd 32 --digits 4 --warmup 1 "
                            "--log-every 2 --eval 4 --clip 0 --trace none --svg none --threads 1";
  for (const Run& r : {Run{"--schedule naive --layers 2", "f32", 2e-3}, Run{"--schedule gpipe --layers 2", "f32", 2e-3},
                       Run{"--schedule 1f1b --layers 2", "f32", 2e-3}, Run{"--schedule zb-h1 --layers 2", "f32", 2e-3},
                       Run{"--schedule interleaved --chunks 2 --layers 6", "f32", 2e-3},
                       Run{"--schedule 1f1b --layers 2", "bf16", 5e-2}}) {
    DYNAMIC_SECTION(r.flags << " " << r.precision) {
      const std::string train = std::string(BRIGADE_CLI) + " train --stages 4 " + r.flags + model;
      // A deadlock between the ranks ends at the call timeout: 60 s, not the default 300. Ranks may
      // share a GPU only where NCCL is asked to allow it.
      test::CommandResult gpu = test::run_command("BRIGADE_COMM_TIMEOUT=60 NCCL_MULTI_RANK_GPU_ENABLE=1 " +
                                                  std::string(BRIGADE_CLI) + " launch -n 4 -- " + train +
                                                  " --device cuda --precision " + r.precision);
      INFO(gpu.output);
      REQUIRE(gpu.status == 0);
      REQUIRE_THAT(gpu.output, Catch::Contains("[rank 0] pipeline: "));
      REQUIRE_THAT(gpu.output, Catch::Contains("[rank 0] run: 6 steps of 8 sequences, seed 1, cuda:0, "));
      test::CommandResult cpu = test::run_command(train + " --device cpu --precision f32");
      INFO(cpu.output);
      REQUIRE(cpu.status == 0);
      const std::vector<double> want = losses(cpu.output), got = losses(gpu.output);
      REQUIRE(want.size() == 3);
      REQUIRE(got.size() == want.size());
      CHECK(got.back() < got.front());  // it learns
      for (size_t i = 0; i < want.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= r.tolerance);
    }
  }
}

TEST_CASE("gpu launch: several NCCL ranks in one process need eager module loading; bench pipeline asks for it",
          "[gpu][launch][nccl]") {
  // bench pipeline --transport nccl puts two ranks in one process (on two GPUs where there are, else on
  // one: NCCL >= 2.30.3). Under CUDA's lazy module loading that hung on an H200; brigade refuses it with
  // the fix, and the command asks for eager loading itself unless the user chose.
  if (cuda_device_count() < 2 && !comm::nccl_multi_rank_per_gpu()) {
    WARN(cuda_device_count() << " GPU(s) and NCCL " << comm::nccl_version() << " < 2.30.3: nothing to run");
    return;
  }
  const std::string bench = std::string(BRIGADE_CLI) +
                            " bench pipeline --transport nccl --quick --stages 2 --microbatches 2 --schedules 1f1b";
  test::CommandResult lazy = test::run_command("BRIGADE_COMM_TIMEOUT=60 CUDA_MODULE_LOADING=LAZY " + bench);
  INFO(lazy.output);
  CHECK(lazy.status != 0);
  CHECK_THAT(lazy.output, Catch::Contains("need CUDA's eager module loading (CUDA_MODULE_LOADING=EAGER"));
  // The child would inherit this process's EAGER (tests/gpu_main.cpp): unset it, so the command's own
  // request is what makes it eager.
  test::CommandResult eager = test::run_command("env -u CUDA_MODULE_LOADING BRIGADE_COMM_TIMEOUT=60 " + bench);
  INFO(eager.output);
  CHECK(eager.status == 0);
  CHECK_THAT(eager.output, Catch::Contains("1f1b"));
}

TEST_CASE("gpu launch: a GPT that one device's memory limit refuses trains on four NCCL ranks under the same limit",
          "[gpu][launch][nccl][memory]") {
  // Each rank builds only its own layers, so a limit one device cannot train under is enough for each
  // of four stages. The allocator's per-process limit (--memory-limit) is the measure: what it
  // reserves from cudaMalloc, cached blocks included (core/cuda/caching_allocator.h).
  if (cuda_device_count() < 4 && !comm::nccl_multi_rank_per_gpu()) {
    WARN(cuda_device_count() << " GPU(s) and NCCL " << comm::nccl_version() << " < 2.30.3: nothing to run");
    return;
  }
  const std::string model = " --layers 4 --embd 256 --heads 4 --batch 8 --microbatches 4 --digits 4 --steps 2 "
                            "--eval 8 --threads 1 --trace none --svg none --log-every 1 --device cuda "
                            "--memory-limit 64MiB";
  test::CommandResult one = test::run_command(std::string(BRIGADE_CLI) + " train --stages 0" + model);
  INFO(one.output);
  CHECK(one.status != 0);
  CHECK_THAT(one.output, Catch::Contains("out of memory on cuda:0") &&
                             Catch::Contains("that would pass this process's limit of 64.00 MiB") &&
                             Catch::Contains("To fit, try: more pipeline stages"));
  test::TempDir dir;
  const std::string metrics = dir.file("m.jsonl");
  test::CommandResult four = test::run_command("BRIGADE_COMM_TIMEOUT=120 " + std::string(BRIGADE_CLI) +
                                               " launch -n 4 -- " + std::string(BRIGADE_CLI) + " train --stages 4" +
                                               model + " --metrics " + metrics + " --curves none");
  INFO(four.output);
  CHECK(four.status == 0);
  CHECK_THAT(four.output, Catch::Contains("[rank 0] step 2/2") && Catch::Contains("held-out accuracy") &&
                              Catch::Contains("[rank 0] memory (last step, device)"));
  // Each process's device peak is its own allocations (its rank's account): each within the limit,
  // together more than the one device was allowed — which is why it failed.
  const std::vector<double> peaks = last_peaks(metrics);
  REQUIRE(peaks.size() == 4);
  double sum = 0;
  for (double bytes : peaks) {
    CHECK(bytes > 0);
    CHECK(bytes < 64.0 * (1 << 20));
    sum += bytes;
  }
  CHECK(sum > 64.0 * (1 << 20));
}
