// Runner for GPU test suites: with no usable GPU (no CUDA in this build, no driver, no device) it
// exits 77, which meson reports as SKIP — a GPU test never "passes" without running.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "core/device.h"

int main(int argc, char** argv) {
  // Listing the cases needs no GPU: coverage is visible anywhere.
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--list", 0) == 0) return Catch::Session().run(argc, argv);
  if (brigade::cuda_device_count() == 0) {
    std::printf("no usable GPU (CUDA %s in this build): skipping\n",
#if BRIGADE_HAVE_CUDA
                "enabled"
#else
                "disabled"
#endif
    );
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
