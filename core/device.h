// Device: where a tensor's bytes live — the host ("cpu") or one GPU ("cuda:N").
#pragma once

#include <string>

namespace brigade {

enum class DeviceType : unsigned char { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  static Device parse(const std::string& text);  // "cpu", "cuda", "cuda:1"; throws otherwise

  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const;  // "cpu" or "cuda:N"
  bool operator==(const Device& o) const { return type == o.type && (type == DeviceType::cpu || index == o.index); }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

// Number of CUDA devices usable by this process: 0 when brigade was built without CUDA, when no
// driver is installed, or when no GPU is present. Never throws.
int cuda_device_count();
bool cuda_available();
// Why cuda_device_count() is 0, for messages: "cudaErrorInsufficientDriver: CUDA driver version is
// insufficient for CUDA runtime version", "no CUDA device", "built without CUDA"; "" with a GPU.
std::string cuda_unavailable_reason();

}  // namespace brigade
