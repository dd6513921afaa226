// Each rank's own GPU memory, when ranks are threads sharing one GPU: the caching allocator charges
// every block to the account of the thread that asked for it (core/memory_account.h), and
// `brigade train --device cuda --stages P` reports and records each rank's peak from its account.
// The reference is outside brigade's bookkeeping: what the CUDA runtime says it has handed out
// (cudaMemGetInfo; on the emulator its own cudaMalloc record, exact to the byte).
#include <catch2/catch.hpp>

// Without CUDA in the build there is nothing to compile: gpu_main exits 77 (SKIP).
#if BRIGADE_HAVE_CUDA

#include <cuda_runtime.h>

#include <barrier>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/memory_account.h"
#include "core/storage.h"
#include "core/stream.h"
#include "temp_dir.h"
#include "train/metrics.h"  // tools/train/
#include "train_run.h"

using namespace brigade;

namespace {

const Device kGpu = Device::cuda(0);
constexpr size_t MiB = size_t(1) << 20;

// Bytes the CUDA runtime has handed out on the current device (every process's, on a real GPU).
size_t runtime_allocated() {
  size_t free_bytes = 0, total_bytes = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  return total_bytes - free_bytes;
}

// Rank r's blocks: whole multiples of the allocator's 2 MiB granule, so each is one cudaMalloc of
// exactly its size, and different for every rank, so charging one rank's block to another shows.
std::vector<Storage> allocate_for_rank(int r) {
  std::vector<Storage> blocks;
  for (size_t mib : {2 * size_t(r + 1), size_t(4), size_t(2)}) blocks.emplace_back(mib * MiB, kGpu);
  return blocks;
}

}  // namespace

TEST_CASE("gpu rank memory: each rank thread's device peak is what its own blocks took from the runtime",
          "[gpu][memory]") {
  for (int P : {2, 4}) {
    DYNAMIC_SECTION(P << " rank threads on one GPU") {
      cuda_empty_cache();
      device_synchronize(kGpu);
      const size_t base = runtime_allocated();
      // Each rank alone, on its own stream as a pipeline's ranks are (a stream's freed blocks are
      // cached for that stream only): what the runtime handed out for it.
      std::vector<size_t> alone(static_cast<size_t>(P));
      for (int r = 0; r < P; ++r) {
        cuda_empty_cache();  // the ranks before this one: their blocks are cached, not given back
        Stream stream = Stream::create(kGpu);
        const StreamGuard on_stream(stream);
        std::vector<Storage> blocks = allocate_for_rank(r);
        alone[size_t(r)] = runtime_allocated() - base;
      }
      cuda_empty_cache();
      REQUIRE(runtime_allocated() == base);

      // All together, each thread with its own account; all hold their blocks at once (the barrier),
      // when the runtime's total is taken, and then leave them to the main thread to free.
      std::vector<std::shared_ptr<MemoryAccount>> accounts;
      for (int r = 0; r < P; ++r) accounts.push_back(std::make_shared<MemoryAccount>());
      std::vector<std::vector<Storage>> handed_over(static_cast<size_t>(P));
      std::barrier all_hold(P);
      size_t together = 0;
      {
        std::vector<std::jthread> ranks;
        for (int r = 0; r < P; ++r)
          ranks.emplace_back([&, r] {
            Stream stream = Stream::create(kGpu);
            const StreamGuard on_stream(stream);
            const DeviceMemoryScope charged_to_this_rank(accounts[size_t(r)]);
            handed_over[size_t(r)] = allocate_for_rank(r);
            all_hold.arrive_and_wait();
            if (r == 0) together = runtime_allocated() - base;
            all_hold.arrive_and_wait();
          });
      }
      size_t sum = 0;
      for (int r = 0; r < P; ++r) {
        INFO("rank " << r);
        // Equal, not just bounded: nothing was cached, no rank freed before its peak, and every block
        // is one cudaMalloc of exactly the size the allocator charges.
        CHECK(accounts[size_t(r)]->peak() == alone[size_t(r)]);
        CHECK(accounts[size_t(r)]->allocated() == alone[size_t(r)]);
        sum += alone[size_t(r)];
      }
      CHECK(together == sum);
      // Freed by another thread, a block still leaves the account of the rank that allocated it.
      handed_over.clear();
      for (int r = 0; r < P; ++r) {
        CHECK(accounts[size_t(r)]->allocated() == 0);
        CHECK(accounts[size_t(r)]->peak() == alone[size_t(r)]);
      }
      cuda_empty_cache();
    }
  }
}

namespace {

// Each rank line of the memory report: its measured / predicted ratio.
std::vector<double> report_ratios(const std::string& text) {
  std::vector<double> ratios;
  const std::regex line(R"(  rank (\d+): predicted [^\n]*, measured/predicted ([0-9.]+);)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator(); ++it)
    ratios.push_back(std::stod((*it)[2]));
  return ratios;
}

}  // namespace

TEST_CASE("gpu train: rank threads sharing a GPU each report and record their own device peak",
          "[gpu][train][memory]") {
  // A llama (grouped kv heads, untied head: no tie between the first and last stage) as well as GPT-2.
  for (const auto& [P, arch] : {std::pair{2, "gpt2"}, std::pair{4, "gpt2"}, std::pair{4, "llama"}}) {
    DYNAMIC_SECTION("--stages " << P << " --arch " << arch) {
      test::TempDir dir;
      const std::string metrics = dir.file("m.jsonl");
      cuda_empty_cache();
      reset_peak_memory(kGpu);
      std::vector<std::string> args = {
          "--device", "cuda", "--stages", std::to_string(P), "--layers", "2", "--heads", "2", "--embd", "32",
          "--digits", "4", "--batch", "8", "--microbatches", "4", "--steps", "2", "--warmup", "1", "--eval", "4",
          "--log-every", "1", "--trace", "none", "--svg", "none", "--metrics", metrics, "--curves", "none",
          "--arch", arch};
      if (std::string(arch) == "llama") args.insert(args.end(), {"--kv-heads", "1", "--untied"});
      const std::string out = test::train_ok(args);
      INFO(out);
      REQUIRE_THAT(out, Catch::Contains("memory (last step, device)"));
      // Each rank's measured peak is near what its own layers, gradients, optimizer state and
      // activations take: a rank charged with another's blocks, or with none, is far off.
      const std::vector<double> ratios = report_ratios(out);
      REQUIRE(ratios.size() == size_t(P));
      for (int r = 0; r < P; ++r) {
        INFO("rank " << r);
        CHECK(ratios[size_t(r)] > 0.8);
        CHECK(ratios[size_t(r)] < 1.25);
      }
      // The metrics record the same accounts: each rank's peak is some of what the device held at once.
      const std::vector<train::MetricsRecord> records = train::read_metrics(metrics);
      REQUIRE(!records.empty());
      const double device_peak = double(cuda_memory_stats(kGpu).peak_allocated);
      for (const train::MetricsRecord& record : records) {
        REQUIRE(record.peak_memory_bytes.size() == size_t(P));
        for (double bytes : record.peak_memory_bytes) {
          CHECK(bytes > 0);
          CHECK(bytes < device_peak);
        }
      }
    }
  }
}

#endif  // BRIGADE_HAVE_CUDA
