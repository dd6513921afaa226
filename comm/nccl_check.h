// Return-code checks for NCCL (NCCL translation units only), like core/cuda/check.h for CUDA.
#pragma once

#include <nccl.h>

#include "core/error.h"

namespace brigade::comm {

inline void nccl_check(ncclResult_t result, const char* expr, const char* file, int line) {
  if (result != ncclSuccess)
    fail("NCCL error: ", expr, " returned ", ncclGetErrorString(result), " (", int(result), ") at ", file, ":", line);
}

}  // namespace brigade::comm

// For calls that must succeed outright. Non-blocking communicators also return ncclInProgress from
// init, split and ncclGroupEnd: those are checked by hand and then polled (comm/nccl_lanes.cpp).
#define BRIGADE_NCCL_CHECK(expr) ::brigade::comm::nccl_check((expr), #expr, __FILE__, __LINE__)
