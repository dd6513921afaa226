// Index scans and the host (kernels/checked_indices.cpp, Storage::host_mirror): ids and targets
// copied from the host are checked on the host, so embedding and cross-entropy queue their kernels
// without waiting for the GPU. Inside a pipeline that wait would sit behind NCCL transfers to other
// ranks (docs/comm.md). A kernel spinning on a pinned flag holds the stream; a call that waited for
// the GPU could only return after a helper thread raised the flag, seconds later.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <chrono>
#include <future>
#include <thread>

#include "brigade.h"
#include "kernels/ops.h"
#include "tests/gpu/emulator_kernels.h"

using namespace brigade;
using Catch::Contains;
namespace et = brigade::emu_test;
using et::asynchronous;

namespace {

// Holds `stream` until `after` has passed (so a call that wrongly waits still ends), or until the
// spinning kernel gives up by itself (emulator_kernels.cu bounds its spin).
struct HeldStream {
  volatile int* flag = nullptr;
  int* sink = nullptr;
  cudaEvent_t spun = nullptr;  // complete once the spinning kernel has ended
  std::future<void> releaser;
  HeldStream(const Stream& stream, std::chrono::milliseconds after) {
    void* f = nullptr;
    REQUIRE(cudaMallocHost(&f, sizeof(int)) == cudaSuccess);
    flag = static_cast<volatile int*>(f);
    *flag = 0;
    REQUIRE(cudaMalloc(&sink, sizeof(int)) == cudaSuccess);
    et::wait_for_flag(flag, sink, 1, static_cast<cudaStream_t>(stream.raw()));
    REQUIRE(cudaGetLastError() == cudaSuccess);
    REQUIRE(cudaEventCreateWithFlags(&spun, cudaEventDisableTiming) == cudaSuccess);
    REQUIRE(cudaEventRecord(spun, static_cast<cudaStream_t>(stream.raw())) == cudaSuccess);
    releaser = std::async(std::launch::async, [this, after] {
      const auto until = std::chrono::steady_clock::now() + after;
      while (*flag == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      *flag = 1;
    });
  }
  bool held() const { return cudaEventQuery(spun) == cudaErrorNotReady; }
  ~HeldStream() {
    *flag = 1;
    releaser.wait();
    cudaDeviceSynchronize();
    cudaEventDestroy(spun);
    cudaFree(sink);
    cudaFreeHost(const_cast<int*>(flag));
  }
};

}  // namespace

TEST_CASE("index scans: ids copied from the host are checked there, without waiting for the GPU",
          "[gpu][emulator][async][indices]") {
  if (!asynchronous()) return;
  const Device gpu = Device::cuda(0);
  Stream stream = Stream::create(gpu);
  StreamGuard on(stream);
  Tensor weight = randn({10, 4}, DType::f32).to(gpu);
  Tensor logits = randn({6, 10}, DType::f32).to(gpu);
  Tensor ids = from_vector(std::vector<int64_t>{3, 1, 4, 1, 5, 9}, {2, 3}, DType::i64);
  Tensor targets = from_vector(std::vector<int64_t>{2, -100, 7, 0, -100, 9}, {6}, DType::i64);
  Tensor ids_gpu = ids.to(gpu), targets_gpu = targets.to(gpu);
  ops::fill_(ids, 0);  // the host copy was a snapshot: the GPU tensor keeps 3 1 4 1 5 9
  stream.synchronize();

  Tensor rows, per_row;
  ops::CrossEntropyOutput loss;
  {
    HeldStream hold(stream, std::chrono::seconds(3));
    rows = ops::embedding(weight, ids_gpu.slice(1, 1, 3));
    loss = ops::cross_entropy(logits, targets_gpu, -100, Reduction::mean);
    CHECK(hold.held());  // returned while the GPU was still held: nothing waited for it
    CHECK(loss.count == 4);
    // A bad id is named at the call, still without waiting.
    Tensor bad = from_vector(std::vector<int64_t>{2, 10}, {2}, DType::i64).to(gpu);
    CHECK_THROWS_WITH(ops::embedding(weight, bad), Contains("index 10 is out of range for a table of 10"));
    CHECK(hold.held());
  }
  Tensor expected = ops::embedding(weight.to(Device::cpu()), from_vector(std::vector<int64_t>{1, 4, 5, 9}, {2, 2}, DType::i64));
  CHECK(rows.to_vector() == expected.to_vector());
  ops::CrossEntropyOutput reference = ops::cross_entropy(logits.to(Device::cpu()), targets, -100, Reduction::mean);
  CHECK(loss.loss.to_vector()[0] == Approx(reference.loss.to_vector()[0]).epsilon(1e-6));

  // Written on the GPU since: the host copy is stale, so the scan reads the GPU's values (and waits).
  ops::fill_(ids_gpu, 2);
  Tensor again;
  {
    HeldStream hold(stream, std::chrono::milliseconds(300));
    again = ops::embedding(weight, ids_gpu);
    CHECK_FALSE(hold.held());
  }
  CHECK(again.to_vector() == ops::embedding(weight.to(Device::cpu()), full_like(ids, 2)).to_vector());
}

TEST_CASE("index scans: the host copy travels with a copy to another GPU", "[gpu][emulator][async][indices]") {
  if (!asynchronous() || cuda_device_count() < 2) return;
  const Device first = Device::cuda(0), second = Device::cuda(1);
  Tensor ids = from_vector(std::vector<int64_t>{3, 1, 4, 1, 5, 9}, {6}, DType::i64).to(first);
  Stream stream = Stream::create(second);
  StreamGuard on(stream);
  Tensor weight = randn({10, 4}, DType::f32).to(second);
  Tensor moved = ids.slice(0, 2, 6).to(second);  // queued behind nothing yet: copied at once
  stream.synchronize();
  Tensor rows;
  {
    HeldStream hold(stream, std::chrono::seconds(3));
    rows = ops::embedding(weight, moved);
    CHECK(hold.held());
  }
  Tensor expected =
      ops::embedding(weight.to(Device::cpu()), from_vector(std::vector<int64_t>{4, 1, 5, 9}, {4}, DType::i64));
  CHECK(rows.to_vector() == expected.to_vector());
}
