// The groups of `brigade bench kernels`, in the order the report lists them; each measures its
// kernels through a Session (bench/session.h) against the ceilings it measured first.
#pragma once

#if BRIGADE_HAVE_CUDA

#include "bench/session.h"

namespace brigade::bench {

void run_memory_benchmarks(Session& session);  // memory.cpp: copies, elementwise, reductions
void run_gemm_benchmarks(Session& session);    // gemm.cpp: matmuls of a GPT's shapes, vs cuBLAS
void run_conv_benchmarks(Session& session);    // conv.cpp: convolutions, vs cuDNN

}  // namespace brigade::bench

#endif  // BRIGADE_HAVE_CUDA
