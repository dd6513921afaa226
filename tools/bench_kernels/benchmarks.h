// The groups of `brigade bench kernels`, in the order the report lists them; each measures its
// kernels through a Session (bench/session.h) against the ceilings it measured first, at the shapes
// `sizes` gives for the session's device (sizes.h).
#pragma once

#include "bench/session.h"
#include "bench_kernels/sizes.h"

namespace brigade::bench {

void run_memory_benchmarks(Session& session, const Sizes& sizes);  // memory.cpp: copies, elementwise, reductions
void run_gemm_benchmarks(Session& session, const Sizes& sizes);    // gemm.cpp: matmuls of a GPT's shapes
void run_conv_benchmarks(Session& session, const Sizes& sizes);    // conv.cpp: convolutions
void run_attention_benchmarks(Session& session, const Sizes& sizes);  // attention.cpp: fused attention

}  // namespace brigade::bench
