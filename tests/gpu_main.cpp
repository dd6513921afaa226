// Runner for GPU test suites: with no usable GPU (no CUDA in this build, no driver, no device) it
// exits 77, which meson reports as SKIP — a GPU test never "passes" without running.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/cuda/module_loading.h"
#include "core/device.h"

int main(int argc, char** argv) {
  // As brigade's commands do where ranks share a process (core/cuda/module_loading.h): before any
  // CUDA call. The test of the lazy mode's refusal runs a child process with LAZY set.
  brigade::cuda::prefer_eager_module_loading();
  // Listing the cases needs no GPU: coverage is visible anywhere.
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--list", 0) == 0) return Catch::Session().run(argc, argv);
  if (brigade::cuda_device_count() == 0) {
    // Where a GPU is expected (BRIGADE_REQUIRE_GPU=1, as scripts/gpu-session.sh sets), not finding
    // one is a failure — a too-old driver must not pass as "skipped".
    const char* required = std::getenv("BRIGADE_REQUIRE_GPU");
    const bool must = required != nullptr && std::string(required) == "1";
    std::printf("no usable GPU (%s): %s\n", brigade::cuda_unavailable_reason().c_str(),
                must ? "failing, BRIGADE_REQUIRE_GPU=1" : "skipping");
    return must ? 1 : 77;
  }
#if BRIGADE_CUDA_EMULATOR
  std::printf("CUDA emulator build: the kernels run as CPU fibers on a fake runtime (emulator/)\n");
#endif
  const int failed = Catch::Session().run(argc, argv);
  return failed == 77 ? 1 : failed;  // Catch returns the number of failures: 77 would read as SKIP
}
