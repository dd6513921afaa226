// Small helpers for the tests that launch their own kernels (the emulator's tests, the Hopper
// instruction suite): device memory that frees itself, and the error a launch left.
#pragma once

#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace gpu_test {

// Device memory for n values of T (or a copy of `host`), freed at scope exit.
template <class T>
struct DeviceArray {
  explicit DeviceArray(size_t n) : n(n) { REQUIRE(cudaMalloc(&data, n * sizeof(T)) == cudaSuccess); }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    REQUIRE(cudaMemcpy(data, host.data(), n * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~DeviceArray() { cudaFree(data); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::vector<T> read() const {
    std::vector<T> host(n);
    REQUIRE(cudaMemcpy(host.data(), data, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }
  T* data = nullptr;
  size_t n;
};

// The error the last launch left, with the runtime's text. Kernels run asynchronously: a fault inside
// one is reported by the next synchronising call, so synchronise first; an error the launch itself
// found (a bad configuration, a host pointer) is already there.
inline std::string launch_error() {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return e == cudaSuccess ? "" : std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

}  // namespace gpu_test
