// The CPU's compute ceiling: how many f32 fused multiply-adds brigade's threads can retire per second
// when nothing waits on memory.
//
// Each thread runs kChains independent chains acc = acc * m + c on full vector registers. Independent
// chains are what makes it a peak: one chain is bound by the FMA latency (4-5 cycles), while a core
// issues up to two FMAs per cycle, so it needs about ten chains in flight. Twelve accumulators plus
// the two constants fit the 16 vector registers of AVX2 without spilling. With m just below 1 and c
// small, acc tends to c / (1 - m) = 1: no overflow and no denormals (which would run in microcode).
// Every statement is two floating-point operations per lane, whether compiled as one FMA or as a
// multiply and an add.
#include <algorithm>
#include <cstdint>

#include "bench/ceilings.h"
#include "core/parallel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BRIGADE_FMA_PEAK_AVX2 1
#endif

namespace brigade::bench {
namespace {

constexpr int kChains = 12;
constexpr int64_t kIterations = int64_t(1) << 22;  // per thread and call: ~0.1 s at 100 GFLOP/s

// Where the accumulators go, so the compiler cannot drop the loop.
volatile float g_sink = 0;

#ifdef BRIGADE_FMA_PEAK_AVX2
[[gnu::target("avx2,fma")]] void fma_chains_avx2(int64_t iterations) {
  __m256 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(float(j));
  const __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(0.001f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, c);
  }
  __m256 total = acc[0];
  for (int j = 1; j < kChains; ++j) total = _mm256_add_ps(total, acc[j]);
  float lanes[8];
  _mm256_storeu_ps(lanes, total);
  g_sink = g_sink + lanes[0];
}

bool has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#endif

// The portable loop: 16-byte vectors (SSE on x86-64, NEON on ARM), multiply and add.
using Vec4 = float __attribute__((vector_size(16)));

void fma_chains_portable(int64_t iterations) {
  Vec4 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = Vec4{} + float(j);
  const Vec4 m = Vec4{} + 0.999f, c = Vec4{} + 0.001f;
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = acc[j] * m + c;
  }
  Vec4 total = acc[0];
  for (int j = 1; j < kChains; ++j) total += acc[j];
  g_sink = g_sink + total[0];
}

// The loop for this CPU, and how many f32 lanes one of its statements works on.
struct Loop {
  void (*run)(int64_t iterations);
  int lanes;
};

Loop loop_for_this_cpu() {
#ifdef BRIGADE_FMA_PEAK_AVX2
  if (has_avx2_fma()) return {fma_chains_avx2, 8};
#endif
  return {fma_chains_portable, 4};
}

}  // namespace

std::string cpu_fma_peak_kind() {
  return loop_for_this_cpu().lanes == 8 ? "AVX2+FMA" : "16-byte vectors, multiply + add";
}

Throughput cpu_fma_peak(const TimingOptions& options) {
  const Loop loop = loop_for_this_cpu();
  const int64_t threads = num_threads();
  // One chunk per thread: parallel_for hands each of brigade's threads one.
  auto run = [&] {
    parallel_for(threads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) loop.run(kIterations);
    });
  };
  TimingOptions peak = options;
  peak.flush_cache = false;  // registers only: there is no cache to flush
  peak.min_repeats = std::max(options.min_repeats, 10);
  Throughput t;
  t.time_ms = time_cpu(run, peak);
  // From the FASTEST repeat, not the median: the loop's work never varies, so a slower repeat only
  // says another process had the core. On a shared machine the median would put the "peak" below what
  // a kernel measured in a quieter moment reaches.
  const double flops = 2.0 * double(loop.lanes) * kChains * double(kIterations) * double(threads);
  t.value = flops / (t.time_ms.min * 1e-3) / 1e9;
  return t;
}

}  // namespace brigade::bench
