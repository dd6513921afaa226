// --precision, read once at the command line into the compute dtype (or "auto"), for every command
// that takes it (train, plan, bench step, bench pipeline). Weights, their gradients and the
// optimizer's state stay f32 whatever it says (master weights).
#pragma once

#include <optional>
#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "tools/cli/flags.h"

namespace brigade::cli {

// What --precision names: f32 or bf16, or nullopt for "auto".
using PrecisionChoice = std::optional<DType>;

// `text` as `flag`'s value: f32, bf16, and auto when `allow_auto`; otherwise a UsageError naming the
// flag and the accepted values ("--precision: expected auto, f32 or bf16, got 'f16'").
inline PrecisionChoice parse_precision(const std::string& flag, const std::string& text, bool allow_auto = true) {
  if (allow_auto && text == "auto") return std::nullopt;
  if (text == "f32") return DType::f32;
  if (text == "bf16") return DType::bf16;
  throw UsageError(flag + ": expected " + (allow_auto ? "auto, f32 or bf16" : "bf16 or f32") + ", got '" + text + "'");
}

// "auto", "f32" or "bf16".
inline std::string precision_choice_name(const PrecisionChoice& choice) {
  return choice ? dtype_name(*choice) : "auto";
}

// The compute dtype `choice` stands for on `device`: auto is bf16 on a GPU (tensor cores, half the
// bytes) and f32 on the CPU (whose kernels widen bf16 to f32 anyway, so bf16 there only adds
// conversions).
inline DType precision_on(const PrecisionChoice& choice, Device device) {
  if (choice) return *choice;
  return device.is_cuda() ? DType::bf16 : DType::f32;
}

}  // namespace brigade::cli
