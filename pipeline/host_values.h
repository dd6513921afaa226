// Small f64 vectors for the runtime's collectives (losses, norms, trace rows, output headers). They
// live on the communicator's device: NCCL takes GPU memory only.
#pragma once

#include <algorithm>
#include <vector>

#include "comm/communicator.h"
#include "core/factory.h"

namespace brigade::pipeline {

inline Tensor doubles_on(const comm::Communicator& comm, const std::vector<double>& values) {
  Tensor host = zeros({int64_t(values.size())}, DType::f64);
  std::copy(values.begin(), values.end(), host.data<double>());
  return host.to(comm.device());
}

inline std::vector<double> doubles_of(const Tensor& t) {
  Tensor host = t.to(Device::cpu()).contiguous();
  return std::vector<double>(host.data<double>(), host.data<double>() + host.numel());
}

}  // namespace brigade::pipeline
