// The emulator's module loading (emulator/module_loading.cpp) against the CUDA Programming
// Guide's "Lazy Loading": CUDA_MODULE_LOADING=EAGER loads everything up front; LAZY (the default) loads
// a kernel at its first launch, which may wait for the context to be idle. The emulator takes "may" as
// "does", so the documented hazard — a kernel that spins until a kernel launched after it has run —
// shows: under lazy loading the second launch waits on the host until the first kernel ends.
//
// The GPU test programs run eagerly (tests/gpu_main.cpp), and the mode is read once per process, so
// the lazy case runs in a child process of this binary with CUDA_MODULE_LOADING=LAZY.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "core/cuda/module_loading.h"
#include "tests/comm/run_command.h"
#include "tests/gpu/emulator_fixture.h"
#include "tests/gpu/emulator_kernels.h"

namespace et = brigade::emu_test;
using namespace std::chrono_literals;

namespace {

using et::Fixture;

// Starts a kernel on a that spins until the host raises the flag, then launches write_ones on b from
// another host thread. Returns whether that launch was still waiting (had not returned) after `patience`.
bool second_launch_waits(Fixture& f, std::chrono::milliseconds patience) {
  et::wait_for_flag(f.flag, f.x, 7, f.a);
  std::atomic<bool> returned{false};
  std::thread launcher([&] {
    et::write_ones_on(f.y, 1, f.b);
    returned = true;
  });
  const auto until = std::chrono::steady_clock::now() + patience;
  while (!returned && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  const bool waited = !returned;
  *f.flag = 1;  // the spinning kernel ends; a waiting launch can go on
  launcher.join();
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(f.read(f.x) == 7);
  CHECK(f.read(f.y) == 1);
  return waited;
}

std::string this_program() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  REQUIRE(n > 0);
  return std::string(path, size_t(n));
}

}  // namespace

TEST_CASE("emulator module loading: eager, a kernel's launch never waits for running work",
          "[gpu][emulator][module_loading][async]") {
  REQUIRE(brigade::cuda::module_loading() == brigade::cuda::ModuleLoading::eager);  // gpu_main asked for it
  Fixture f;
  CHECK_FALSE(second_launch_waits(f, 2000ms));
}

// Run by the next case in a child process with CUDA_MODULE_LOADING=LAZY (hidden: not run by default;
// [async] keeps it out of the synchronous-streams run, whose filter ~[async] would pick it up).
TEST_CASE("emulator module loading (child): lazy, a first launch waits for the device to be idle",
          "[.lazy_module_loading_child][async]") {
  REQUIRE(brigade::cuda::module_loading() == brigade::cuda::ModuleLoading::lazy);
  Fixture f;
  CHECK(second_launch_waits(f, 300ms));  // write_ones' first launch waits for wait_for_flag to end
  Fixture again;
  CHECK_FALSE(second_launch_waits(again, 2000ms));  // both loaded now: no wait
}

TEST_CASE("emulator module loading: lazy, a first launch waits for running work (in a child process)",
          "[gpu][emulator][module_loading][async]") {
  const test::CommandResult child = test::run_command(
      "CUDA_MODULE_LOADING=LAZY " + this_program() + " '[.lazy_module_loading_child]'");
  INFO(child.output);
  CHECK(child.status == 0);
  CHECK_THAT(child.output, Catch::Contains("All tests passed"));
}
