// The tuned matmul backend: each problem measured once on the user's own GPU, like cuDNN's
// benchmark mode, then run on the fastest GEMM that agreed with cuBLAS.
//
// The first call of a problem key (device, m, n, k, batch dims, dtypes, each operand's layout class —
// its unit stride, broadcast batch dims, and which backends read it without a copy —, and the
// epilogue: bias, activation, pre) runs every candidate (cuBLAS always; the tensor-core and Hopper
// GEMMs where the device and dtype allow) on the real operands, checks each one's output against
// cuBLAS's (kernels/cuda/gemm_agreement.h: a candidate that disagrees is excluded for the key, with
// one line on stderr), times the rest with CUDA events (the median of a few runs after a warm-up),
// and caches the winner, whose own output is what the call returns. Later calls of the key run the
// winner directly. Inside a stream capture nothing is measured: the cached choice, else cuBLAS
// (not cached). Several threads may tune at once (a pipeline's ranks on different GPUs): the cache is
// mutex-protected; the lock is never held while a GEMM runs.
//
// ops.h's matmul_tunings() and clear_matmul_tunings() report and reset what this file has measured.
#pragma once

#include <functional>
#include <vector>

#include "kernels/cuda/gemm_call.h"

namespace brigade::cuda {

// Runs `call` on the tuned choice for its key, tuning first when the key is new (see above).
void gemm_tuned(const GemmCall& call);

// One GEMM the tuner may pick: its backend (what gets cached and reported) and how to run a call on
// it (normally run_gemm(call, backend)).
struct GemmCandidate {
  ops::MatmulBackend backend;
  std::function<void(const GemmCall&)> run;
};
// What the tuner would try for `call`: cuBLAS first (it is the reference), then the tensor-core and
// Hopper GEMMs when `call` is 16-bit and the current device runs them.
std::vector<GemmCandidate> default_gemm_candidates(const GemmCall& call);

// How long a candidate takes, in milliseconds; `run_once` runs it once on the call's stream.
using GemmTimer = std::function<double(ops::MatmulBackend backend, const std::function<void()>& run_once)>;
// The default: one warm-up run, then the median of five runs, each between two CUDA events.
double time_with_events(ops::MatmulBackend backend, const std::function<void()>& run_once);

// FOR TESTS ONLY: replace the candidate list and/or the timer, so that which candidate wins does not
// depend on timing noise (an empty std::function keeps the default). Process-wide; reset with {}.
struct GemmTunerTestHooks {
  std::function<std::vector<GemmCandidate>(const GemmCall&)> candidates;
  GemmTimer timer;
};
void set_gemm_tuner_test_hooks(GemmTunerTestHooks hooks);

}  // namespace brigade::cuda
