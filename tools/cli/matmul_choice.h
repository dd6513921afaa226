// --matmul's spellings, shared by every command that lets a user pick the GEMM behind GPU matmuls
// (`brigade train`, `brigade bench step`), so the names, their order in --help and the error for a bad
// one are written once.
#pragma once

#include <string>
#include <utility>

#include "kernels/ops.h"
#include "tools/cli/flags.h"

namespace brigade::cli {

// In the order --help lists them.
inline constexpr std::pair<const char*, ops::MatmulBackend> kMatmulChoices[] = {
    {"automatic", ops::MatmulBackend::automatic}, {"cublas", ops::MatmulBackend::cublas},
    {"tuned", ops::MatmulBackend::tuned},         {"tensor-core", ops::MatmulBackend::tensor_core},
    {"hopper", ops::MatmulBackend::hopper},       {"tiled", ops::MatmulBackend::tiled}};

inline std::string matmul_choices() {
  std::string list;
  for (const auto& [name, backend] : kMatmulChoices) list += std::string(list.empty() ? "" : ", ") + name;
  return list;
}

// The backend `name` spells ("tensor_core", ops' own spelling, is accepted too); a UsageError naming
// `flag` and the choices for anything else.
inline ops::MatmulBackend matmul_backend_of(const std::string& name, const std::string& flag = "--matmul") {
  for (const auto& [spelling, backend] : kMatmulChoices)
    if (name == spelling) return backend;
  if (name == "tensor_core") return ops::MatmulBackend::tensor_core;
  throw UsageError(flag + ": expected " + matmul_choices() + ", got '" + name + "'");
}

// `backend` as --matmul spells it ("tensor-core").
inline std::string matmul_choice_name(ops::MatmulBackend backend) {
  for (const auto& [spelling, b] : kMatmulChoices)
    if (b == backend) return spelling;
  return ops::matmul_backend_name(backend);
}

// Sets the process-wide backend for a scope and restores the previous one when it ends, so a test or
// a program that runs a command in-process keeps its own choice afterwards.
class ScopedMatmulBackend {
 public:
  explicit ScopedMatmulBackend(ops::MatmulBackend backend) : previous_(ops::matmul_backend()) {
    ops::set_matmul_backend(backend);
  }
  ~ScopedMatmulBackend() { ops::set_matmul_backend(previous_); }
  ScopedMatmulBackend(const ScopedMatmulBackend&) = delete;
  ScopedMatmulBackend& operator=(const ScopedMatmulBackend&) = delete;

 private:
  ops::MatmulBackend previous_;
};

}  // namespace brigade::cli
