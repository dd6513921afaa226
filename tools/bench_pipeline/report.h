// The benchmark's result for people (tables, with what each column means) and for files (JSON with
// the environment and every number, each sample included).
#pragma once

#include <string>

#include "bench_pipeline/benchmark.h"

namespace brigade::bench_pipeline {

std::string result_text(const BenchResult& result);

// Numbers are written in the shortest form that reads back as the same double; NaN (nothing to
// measure, e.g. the hidden share of a rank that never exchanged) as null.
std::string result_json(const BenchResult& result);

}  // namespace brigade::bench_pipeline
