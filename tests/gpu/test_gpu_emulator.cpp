// The CPU emulator's own tests (-Dgpu_emulator=true builds only): it must run kernels exactly as the
// CUDA programming model defines them (grid and block positions, shared memory and barriers, warp
// shuffles), and it must refuse what would be a bug on a GPU, naming the kernel and the problem.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tests/gpu/device_array.h"
#include "tests/gpu/emulator_kernels.h"

using Catch::Contains;
namespace et = brigade::emu_test;
using gpu_test::DeviceArray;
using gpu_test::launch_error;

namespace {

// Runs `body` in a forked child (the emulator has no threads of its own, so forking is safe) and
// returns its exit status (128 + N for signal N) and everything it wrote. The child never
// returns into Catch: an exception exits with 2, and an alarm ends a child that hangs.
struct ChildResult {
  int exit_status = -1;
  std::string output;
};

template <class Body>
ChildResult in_child_process(Body&& body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    FAIL("fork failed");
  }
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    alarm(60);
    try {
      body();
    } catch (...) {
      _exit(2);
    }
    _exit(0);
  }
  close(fds[1]);
  ChildResult result;  // everything the child wrote: stderr and stdout
  char chunk[4096];
  for (ssize_t n; (n = read(fds[0], chunk, sizeof chunk)) > 0;) result.output.append(chunk, size_t(n));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace

TEST_CASE("emulator: every thread of a 3-D grid of 3-D blocks runs once, at its position", "[gpu][emulator]") {
  const dim3 grid(3, 2, 2), block(5, 4, 2);
  const size_t n = 3 * 2 * 2 * 5 * 4 * 2;
  DeviceArray<int64_t> out(n);
  REQUIRE(cudaMemset(out.data, 0xff, n * sizeof(int64_t)) == cudaSuccess);  // -1 everywhere
  et::positions(out.data, grid, block);
  REQUIRE(launch_error() == "");
  std::vector<int64_t> expected(n);
  std::iota(expected.begin(), expected.end(), int64_t(0));
  REQUIRE(out.read() == expected);
}

TEST_CASE("emulator: shared memory and __syncthreads give a block reduction", "[gpu][emulator]") {
  const int blocks = 3;
  std::vector<float> x(size_t(blocks) * 256);
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (float& v : x) v = uniform(rng);
  DeviceArray<float> dx(x.size()), sums(blocks);
  REQUIRE(cudaMemcpy(dx.data, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  et::block_sum(dx.data, sums.data, blocks);
  REQUIRE(launch_error() == "");
  const std::vector<float> got = sums.read();
  for (int b = 0; b < blocks; ++b) {
    double reference = 0;  // f64, in order: the tree's f32 rounding differs by a few ulps at most
    for (int i = 0; i < 256; ++i) reference += x[size_t(b) * 256 + size_t(i)];
    CHECK(std::abs(got[size_t(b)] - reference) < 1e-4);
  }
}

TEST_CASE("emulator: warp shuffles read the lanes CUDA defines", "[gpu][emulator]") {
  const int threads = 64;  // two warps: lanes restart at 32
  DeviceArray<int> xor_out(threads), down_out(threads), broadcast_out(threads);
  et::shuffles(xor_out.data, down_out.data, broadcast_out.data, threads);
  REQUIRE(launch_error() == "");
  const std::vector<int> x = xor_out.read(), d = down_out.read(), b = broadcast_out.read();
  for (int i = 0; i < threads; ++i) {
    const int lane = i % 32;
    CHECK(x[size_t(i)] == (lane ^ 5) * 10);
    CHECK(d[size_t(i)] == (lane + 3 < 32 ? lane + 3 : lane) * 10);  // beyond the warp: own value
    CHECK(b[size_t(i)] == 70);
  }
}

TEST_CASE("emulator: a shuffle in divergent code fails the launch instead of hanging", "[gpu][emulator]") {
  DeviceArray<int> out(32);
  et::divergent_shuffle(out.data);
  const std::string error = launch_error();
  CHECK_THAT(error, Contains("cudaErrorLaunchFailure"));
  CHECK_THAT(error, Contains("divergent_shuffle_kernel"));
  CHECK_THAT(error, Contains("barriers that cannot open"));
  CHECK_THAT(error, Contains("at __syncthreads (16,0,0)"));
  CHECK_THAT(error, Contains("in a warp shuffle (0,0,0)"));
}

TEST_CASE("emulator: a shuffle from a lane that has exited fails the launch", "[gpu][emulator]") {
  DeviceArray<int> out(32);
  et::shuffle_from_exited_lane(out.data);
  const std::string error = launch_error();
  CHECK_THAT(error, Contains("shuffle_from_exited_lane_kernel"));
  CHECK_THAT(error, Contains("shuffles from lane 16, which has already exited"));
}

TEST_CASE("emulator: a host pointer passed to a kernel fails the launch", "[gpu][emulator]") {
  std::vector<int> host(32, 0);
  et::write_ones(host.data(), 32);
  const std::string error = launch_error();
  CHECK_THAT(error, Contains("write_kernel"));
  CHECK_THAT(error, Contains("argument 0 points to host memory"));
  CHECK(host == std::vector<int>(32, 0));  // nothing ran
  // Device memory is fine, and the error did not stick.
  DeviceArray<int> out(32);
  et::write_ones(out.data, 32);
  CHECK(launch_error() == "");
  CHECK(out.read() == std::vector<int>(32, 1));
}

TEST_CASE("emulator: a launch beyond the GPU's limits is an invalid configuration", "[gpu][emulator]") {
  DeviceArray<int> out(2048);
  et::write_ones(out.data, 2048);
  const std::string error = launch_error();
  CHECK_THAT(error, Contains("cudaErrorInvalidConfiguration"));
  CHECK_THAT(error, Contains("more than 1024 threads in a block"));
}

TEST_CASE("emulator: another device's memory or stream fails the launch", "[gpu][emulator]") {
  int devices = 0;
  REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
  if (devices < 2) {
    SUCCEED("one emulated device (BRIGADE_EMULATED_GPUS=2 runs this)");
    return;
  }
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  int* on_1 = nullptr;
  REQUIRE(cudaMalloc(&on_1, 32 * sizeof(int)) == cudaSuccess);
  cudaStream_t stream_1 = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream_1, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  et::write_ones(on_1, 32);
  CHECK_THAT(launch_error(), Contains("points to memory of device 1, but the kernel runs on device 0"));
  cudaEvent_t event_0 = nullptr;
  REQUIRE(cudaEventCreate(&event_0) == cudaSuccess);
  CHECK(cudaEventRecord(event_0, stream_1) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  et::write_ones(on_1, 32);  // the right device: fine
  CHECK(launch_error() == "");
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  cudaEventDestroy(event_0);
  cudaStreamDestroy(stream_1);
  cudaFree(on_1);
}

TEST_CASE("emulator: a copy whose kind does not match its pointers fails", "[gpu][emulator]") {
  std::vector<int> a(8, 1), b(8, 2);
  DeviceArray<int> d(8);
  // Host to host, said to be device to host.
  CHECK(cudaMemcpy(a.data(), b.data(), 32, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  CHECK_THAT(std::string(cudaGetErrorString(cudaErrorInvalidValue)), Contains("the source is host memory"));
  cudaGetLastError();
  // Past the end of a device allocation.
  CHECK(cudaMemcpy(d.data, a.data(), 64, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  cudaGetLastError();
  CHECK(cudaMemcpy(d.data, a.data(), 32, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(d.read() == a);
}

#if BRIGADE_EMULATOR_ALIGNMENT_CHECKS  // meson warns when the compiler cannot check alignment
TEST_CASE("emulator: a misaligned vector load stops the program, naming the kernel, block and thread",
          "[gpu][emulator]") {
  DeviceArray<float> x(4 * 8 + 4), sums(8);
  std::vector<float> values(x.n);
  std::iota(values.begin(), values.end(), 1.0f);
  REQUIRE(cudaMemcpy(x.data, values.data(), x.n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  // Aligned (offset 0 and 4 floats = 16 bytes): it runs, and each thread sums its four.
  for (int offset : {0, 4}) {
    et::vector_load_sums(x.data, offset, sums.data, 8);
    REQUIRE(launch_error() == "");
    const std::vector<float> got = sums.read();
    for (int i = 0; i < 8; ++i) CHECK(got[size_t(i)] == 4 * (offset + 4 * i) + 10);  // (k+1)+(k+2)+(k+3)+(k+4)
  }
  // One float in: every thread's address is 4 mod 16. A GPU ends the context; so does the emulator,
  // so the launch runs in a child process whose exit and report are checked here.
  const ChildResult child = in_child_process([&] {
    et::vector_load_sums(x.data, 1, sums.data, 8);
    cudaDeviceSynchronize();
  });
  INFO(child.output);
  CHECK(child.exit_status != 0);
  CHECK_THAT(child.output, Contains("misaligned address") && Contains("float4") && Contains("emulator_kernels.cu"));
  CHECK_THAT(child.output, Contains("vector_load_kernel<<<(1,1,1), (8,1,1), 0>>>, block (0,0,0), thread (0,0,0)"));
  CHECK_THAT(child.output, Contains("cudaErrorMisalignedAddress"));
}
#endif

// The PTX ISA: a cp.async's destination is defined only once a cp.async.wait_group of the issuing
// thread has retired its group (wait_group N: all but the N most recent groups). The emulator makes
// the copy land at exactly that moment and poisons the destination (all bits set) before it, so a
// kernel that reads too early reads NaN instead of the right values by luck.
TEST_CASE("emulator: cp.async lands at the wait_group that retires its group, not before", "[gpu][emulator]") {
  const std::vector<uint32_t> src = {11, 12, 13, 14, 21, 22, 23, 24};
  DeviceArray<uint32_t> dsrc(src.size()), out(4);
  REQUIRE(cudaMemcpy(dsrc.data, src.data(), src.size() * sizeof(uint32_t), cudaMemcpyHostToDevice) == cudaSuccess);
  et::cp_async_groups(dsrc.data, out.data);
  REQUIRE(launch_error() == "");
  const std::vector<uint32_t> got = out.read();
  CHECK(got[0] == 0xffffffffu);  // no wait yet: poisoned
  CHECK(got[1] == 11);           // wait_group 1: the first group has landed ...
  CHECK(got[2] == 0xffffffffu);  // ... the second (the most recent) may still be in flight
  CHECK(got[3] == 21);           // wait_group 0: everything
}

// The PTX ISA's mbarrier and cp.async.bulk: a phase completes once its arrivals are in and its
// transaction count is back to zero; a bulk copy's complete-tx is what brings the bytes back. The
// emulator lands a copy at the latest moment a GPU could (when no thread can go on without it), its
// destination poisoned until then.
TEST_CASE("emulator: bulk copies through a two-stage mbarrier ring give every chunk, once", "[gpu][emulator]") {
  const int chunks = 7;
  std::vector<float> src(size_t(chunks) * 64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = float(i % 97) * 0.5f + float(i / 64);
  DeviceArray<float> dsrc(src.size()), out(64);
  REQUIRE(cudaMemcpy(dsrc.data, src.data(), src.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  et::bulk_ring(dsrc.data, chunks, out.data);
  REQUIRE(launch_error() == "");
  const std::vector<float> got = out.read();
  for (int t = 0; t < 64; ++t) {
    double expected = 0;
    for (int c = 0; c < chunks; ++c) expected += src[size_t(c * 64 + t)];
    CHECK(got[size_t(t)] == Approx(expected).epsilon(1e-6));
  }
}

TEST_CASE("emulator: a bulk copy's bytes exist only once its mbarrier phase completes", "[gpu][emulator]") {
  std::vector<uint32_t> src(16);
  for (uint32_t i = 0; i < 16; ++i) src[i] = 100 + i;
  DeviceArray<uint32_t> dsrc(16), out(2);
  REQUIRE(cudaMemcpy(dsrc.data, src.data(), 64, cudaMemcpyHostToDevice) == cudaSuccess);
  et::bulk_copy_rules(dsrc.data, out.data, false, false);
  REQUIRE(launch_error() == "");
  const std::vector<uint32_t> got = out.read();
  CHECK(got[0] == 0xffffffffu);  // read before the wait: poisoned
  CHECK(got[1] == 100);          // after it: the copy
  // A phase expecting 32 bytes from a 64-byte copy never completes (its tx-count ends at -32).
  et::bulk_copy_rules(dsrc.data, out.data, true, false);
  CHECK_THAT(launch_error(), Contains("for an mbarrier phase (0,0,0)"));
  // A block that ends while its copy is in flight leaves it writing shared memory that is gone.
  et::bulk_copy_rules(dsrc.data, out.data, false, true);
  CHECK_THAT(launch_error(), Contains("ended with 1 cp.async.bulk copies in flight"));
}

TEST_CASE("emulator: each rule of mbarrier and cp.async.bulk, broken, fails the launch", "[gpu][emulator]") {
  DeviceArray<uint32_t> src(16);
  const char* expected[] = {
      "where no mbarrier.init has made an mbarrier",
      "mbarrier.init with a count of 0",
      "mbarrier.init on a shared address that is not 8-byte aligned",
      "on an mbarrier another thread initialised with no __syncthreads since",
      "cp.async.bulk of 24 bytes (the size must be a multiple of 16)",
      "cp.async.bulk with an address that is not 16-byte aligned",
      "cp.async.bulk's source",
      "more arrivals than its count",
      "with a phase parity of 2",
      "(the PTX ISA's range is +-(2^20 - 1))",
      "that hold the mbarrier at",
      "__trap",
  };
  for (int rule = 0; rule < int(sizeof(expected) / sizeof(expected[0])); ++rule) {
    INFO("rule " << rule);
    et::mbarrier_rule(src.data, rule);
    CHECK_THAT(launch_error(), Contains(expected[rule]));
  }
}

// A cp.async into shared memory another warp has read since the last barrier is a race on a GPU
// (nothing orders the read before the write). The emulator runs warps in near lockstep, so the race
// would seldom change a result here; its detector reports it whatever the interleaving.
TEST_CASE("emulator: refilling shared memory another warp read, with no barrier between, fails the launch",
          "[gpu][emulator]") {
  const std::vector<uint32_t> src = {1, 2, 3, 4};
  DeviceArray<uint32_t> dsrc(src.size()), out(32);
  REQUIRE(cudaMemcpy(dsrc.data, src.data(), src.size() * sizeof(uint32_t), cudaMemcpyHostToDevice) == cudaSuccess);
  et::refill_after_read(dsrc.data, out.data, true);
  REQUIRE(launch_error() == "");  // with the barrier: ordered
  CHECK(out.read() == std::vector<uint32_t>(32, 0));  // warp 1 read the zeros, before the refill
  et::refill_after_read(dsrc.data, out.data, false);
  const std::string error = launch_error();
  CHECK_THAT(error, Contains("refill_after_read_kernel"));
  // Whichever access the fibers happen to reach second is the one reported, naming the other.
  CHECK_THAT(error, Contains("touches shared bytes [") && Contains(", +16)"));  // row 0 of the tile
  CHECK_THAT(error, Contains("since the last __syncthreads: a race on a GPU"));
  CHECK_THAT(error, Contains("warp 0") && Contains("warp 1"));
}
