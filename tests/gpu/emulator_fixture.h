// What the emulator's stream, graph and module-loading tests start from: two non-blocking streams, a
// pinned flag the host raises (the spinning kernel of emulator_kernels.h waits for it, so tests can
// hold work "still running" without depending on timing), and two device buffers of 32 ints, zeroed.
#pragma once

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

namespace brigade::emu_test {

struct Fixture {
  cudaStream_t a = nullptr, b = nullptr;
  volatile int* flag = nullptr;
  int* x = nullptr;
  int* y = nullptr;
  explicit Fixture(int flag_value = 0) {
    REQUIRE(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) == cudaSuccess);
    void* f = nullptr;
    REQUIRE(cudaMallocHost(&f, sizeof(int)) == cudaSuccess);
    flag = static_cast<volatile int*>(f);
    *flag = flag_value;
    REQUIRE(cudaMalloc(&x, 32 * sizeof(int)) == cudaSuccess);
    REQUIRE(cudaMalloc(&y, 32 * sizeof(int)) == cudaSuccess);
    zero();
  }
  ~Fixture() {
    *flag = 1;  // release anything still waiting
    cudaStreamSynchronize(a);
    cudaStreamSynchronize(b);
    cudaFree(x);
    cudaFree(y);
    cudaFreeHost(const_cast<int*>(flag));
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    cudaGetLastError();
  }
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;
  void zero() {
    REQUIRE(cudaMemset(x, 0, 32 * sizeof(int)) == cudaSuccess);
    REQUIRE(cudaMemset(y, 0, 32 * sizeof(int)) == cudaSuccess);
  }
  int read(const int* p) const {
    int v = -1;
    REQUIRE(cudaMemcpy(&v, p, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
    return v;
  }
};

}  // namespace brigade::emu_test
