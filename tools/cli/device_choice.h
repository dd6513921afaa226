// --device, read once at the command line into a Device (or "auto"), for every command that takes it
// (train, generate, bench step, bench pipeline).
//
// Reading "cuda:1" and being able to use it are two questions. The first is answered while parsing,
// so a misspelt device is a usage error. The second is asked once, when the run starts
// (usable_device), so that --help and every usage error work on a machine without a GPU, and a run
// there fails saying why and what to use instead.
#pragma once

#include <optional>
#include <string>

#include "core/device.h"
#include "core/error.h"
#include "tools/cli/flags.h"

namespace brigade::cli {

// What --device names: a device, or nullopt for "auto".
using DeviceChoice = std::optional<Device>;

// `text` as `flag`'s value: cpu, cuda, cuda:N, and auto when `allow_auto`; otherwise a UsageError
// naming the flag and the accepted values ("--device: expected auto, cpu or cuda, got 'tpu'").
inline DeviceChoice parse_device(const std::string& flag, const std::string& text, bool allow_auto = true) {
  if (allow_auto && text == "auto") return std::nullopt;
  if (text == "cpu" || text == "cuda" || text.rfind("cuda:", 0) == 0) {
    try {
      return Device::parse(text);
    } catch (const Error&) {
      // "cuda:x": reported below with the accepted spellings
    }
  }
  throw UsageError(flag + ": expected " + (allow_auto ? "auto, cpu or cuda" : "cpu or cuda") + ", got '" + text + "'");
}

// "auto", "cpu", "cuda:0": for --help's defaults and run headers.
inline std::string device_choice_name(const DeviceChoice& choice) { return choice ? choice->str() : "auto"; }

// The device `choice` stands for, unchecked: auto is cuda:0 when this build has CUDA and a GPU is
// visible, else the CPU. For decisions taken before the run (a usage check, a default size).
inline Device device_or_default(const DeviceChoice& choice) {
  if (choice) return *choice;
  return cuda_available() ? Device::cuda(0) : Device::cpu();
}

// The device a run uses, checked: a CUDA device this build or machine cannot use is an error saying
// so and naming --device cpu as the way out.
inline Device usable_device(const DeviceChoice& choice) {
  const Device device = device_or_default(choice);
  if (device.is_cpu()) return device;
#ifdef BRIGADE_HAVE_CUDA
  if (!cuda_available()) fail("--device cuda: no CUDA device is visible on this machine; use --device cpu");
#else
  fail("--device cuda: this build has no CUDA backend (nvcc was not found, or it was configured with "
       "-Dcuda=disabled); use --device cpu");
#endif
  return device;
}

}  // namespace brigade::cli
