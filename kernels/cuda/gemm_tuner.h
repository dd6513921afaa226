// The tuned matmul backend: each problem measured once on the user's own GPU, like cuDNN's
// benchmark mode, then run on the fastest GEMM that agreed with cuBLAS.
//
// The first call of a problem key (device, m, n, k, batch dims, dtypes, every stride of a and b, each
// operand's layout class — its alignment and which backends read it without a copy —, and the
// epilogue: bias, activation, pre) checks every candidate (cuBLAS always; the tensor-core and Hopper
// GEMMs where the device and dtype allow) on synthetic operands of the call's geometry, exactly
// (kernels/cuda/gemm_agreement.h: a candidate that disagrees, or refuses the shape, is excluded for
// the key, with one line on stderr), times the rest on the real operands with CUDA events (the median
// of a few runs after a warm-up), and caches the winner, which then runs the call itself. Later calls
// of the key run the winner directly. A candidate that does not finish within a bound, or faults the
// GPU, throws: the error reaches the caller. Not tuned, and run on cuBLAS: 32- and 64-bit calls (one
// candidate), calls below 2²⁷ flops (launch-bound, and often of ever-changing shapes), k > 2²⁰ (past
// the exact check), new keys once 1024 are cached, and calls when the synthetic operands do not fit
// in memory (one line on stderr; not cached). Inside a stream capture nothing is measured: the cached
// choice, else cuBLAS (not cached). Threads may call it at once: tuning is serialised per device
// (a single-process pipeline puts every rank's thread on the same GPU, and candidates measured side by
// side would time each other), and the cache has a lock of its own, never held while a GEMM runs.
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
// Hopper GEMMs when `call` is 16-bit and call.out's device runs them.
std::vector<GemmCandidate> default_gemm_candidates(const GemmCall& call);

// How long a candidate takes, in milliseconds; `run_once` runs it once on the call's stream.
using GemmTimer = std::function<double(ops::MatmulBackend backend, const std::function<void()>& run_once)>;
// The default: one warm-up run, then the median of five runs, each between two CUDA events recorded
// on `device`'s current stream (the call's device, not whichever is current on this thread).
double time_with_events(Device device, ops::MatmulBackend backend, const std::function<void()>& run_once);

// FOR TESTS ONLY: replace the candidate list and/or the timer, so that which candidate wins does not
// depend on timing noise (an empty std::function keeps the default), and lower the size below which
// nothing is tuned or the number of keys cached (negative: the defaults, 2²⁷ flops and 1024 keys), so
// that small shapes that run fast on the emulator are tuned. Process-wide; reset with {}.
struct GemmTunerTestHooks {
  std::function<std::vector<GemmCandidate>(const GemmCall&)> candidates;
  GemmTimer timer;
  double min_flops = -1;
  int64_t max_keys = -1;
};
void set_gemm_tuner_test_hooks(GemmTunerTestHooks hooks);

}  // namespace brigade::cuda
