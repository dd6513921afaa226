// Describing the machine and the build a benchmark ran on (bench/report.h: Environment).
#pragma once

#include <string>

#include "bench/report.h"
#include "core/device.h"

namespace brigade::bench {

// Everything known about `device` and this build: for the CPU its name, cores, the threads brigade
// uses and its last-level cache; for a GPU its properties, driver and CUDA versions (empty without
// CUDA or without a GPU). The date and commit are always filled in.
Environment describe_environment(Device device);

// "12.8" for the CUDA runtime's and driver's integer versions (12080).
std::string cuda_version_text(int version);

// The driver version from the text of /proc/driver/nvidia/version
// ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Wed ..." -> "570.86.15"); empty when the
// text has no such line.
std::string nvidia_driver_version(const std::string& proc_text);

// The current time in UTC, "2026-11-21T11:30:00Z".
std::string utc_timestamp();

}  // namespace brigade::bench
