// Validating index tensors (embedding rows, cross-entropy targets, max's argmax positions).
//
// Ops index memory with these values, so every one is checked before any kernel uses it — once, in
// the op layer, which turns the first bad one into an Error naming it. The scan is a kernel like any
// other (declared once for both backends in kernels/twins/indices.inc), because on a GPU the
// indices live in device memory and only a summary should travel back to the host.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace brigade {

// What a scan found. `counted` is the number of indices not equal to ignore_index; `bad_position`
// is the row-major position of the first index that is neither ignore_index nor in [0, limit)
// (-1 when there is none), and `bad_value` that index.
//
// Inside a CUDA graph capture the host cannot wait for the scan: `counted` is then -1 and
// `device_counts` holds the count on the device (its first i64 element), computed at every replay;
// a bad index there stops the replay on the GPU (a trap: the next synchronisation fails) instead of
// throwing, since no host code runs during a replay.
struct IndexScan {
  int64_t counted = 0;
  Tensor device_counts;
  int64_t bad_position = -1;
  int64_t bad_value = 0;
};

}  // namespace brigade
