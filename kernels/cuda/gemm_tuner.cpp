// gemm_tuner.h's tuned backend: the key, the cache, the measurement and the bounded waits.
#include "kernels/cuda/gemm_tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/cuda/capture.h"
#include "core/cuda/check.h"
#include "core/cuda/current.h"
#include "core/stream.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_agreement.h"

namespace brigade::cuda {
namespace {

using ops::MatmulBackend;

// How long the host waits for one candidate's work before calling it hung. A GEMM of any size a
// user runs takes milliseconds; a kernel that has never run on this hardware might never finish,
// and the user should get an error naming it, not a silent hang. (The emulator is slow: minutes.)
constexpr double kWaitSeconds = 600;
constexpr int kTimedRuns = 5;

// The backends whose layout the key records: what each reads without a copy.
constexpr MatmulBackend kLayoutBackends[] = {MatmulBackend::cublas, MatmulBackend::tensor_core,
                                             MatmulBackend::hopper};

// An operand's layout class: which of its two matrix strides is 1 (0: the one along k, 1: the
// other, 2: neither), which backends read it in place (alignment included; a bit each from bit 2),
// and which batch dims broadcast (a bit each from bit 8) — what changes a backend's cost or path.
int64_t layout_class(const Tensor& x, bool is_b) {
  const int64_t along_k = x.stride(is_b ? -2 : -1), other = x.stride(is_b ? -1 : -2);
  int64_t code = along_k == 1 ? 0 : other == 1 ? 1 : 2;
  for (size_t i = 0; i < std::size(kLayoutBackends); ++i)
    if (reads_in_place(x, is_b, kLayoutBackends[i])) code |= int64_t(1) << (2 + i);
  for (int64_t d = 0; d < x.dim() - 2; ++d)
    if (x.stride(d) == 0 && x.size(d) > 1) code |= int64_t(1) << (8 + d);
  return code;
}

// The key: everything that decides which candidates can run and what they cost. Compact, since
// every tuned call looks it up: device, dtypes, k, each operand's layout class, the epilogue, and
// out's shape (m, n and the batch dims).
using Key = std::vector<int64_t>;
Key problem_key(const GemmCall& c) {
  Key key = {c.out.device().index,   int64_t(c.a.dtype()),      int64_t(c.out.dtype()),   c.a.size(-1),
             layout_class(c.a, false), layout_class(c.b, true), int64_t(c.bias.defined()), int64_t(c.act),
             int64_t(c.pre.defined())};
  key.insert(key.end(), c.out.shape().begin(), c.out.shape().end());
  return key;
}

std::string layout_text(const Tensor& x, bool is_b) {
  const int64_t code = layout_class(x, is_b);
  std::string s = code % 4 == 0 ? "k-contiguous" : code % 4 == 1 ? (is_b ? "n-contiguous" : "m-contiguous") : "strided";
  std::string broadcast;
  for (int64_t d = 0; d < x.dim() - 2; ++d) broadcast += code >> (8 + d) & 1 ? 'b' : '.';
  if (broadcast.find('b') != std::string::npos) s += ", batch " + broadcast;
  std::string direct;
  for (size_t i = 0; i < std::size(kLayoutBackends); ++i)
    if (code >> (2 + i) & 1)
      direct += std::string(direct.empty() ? "" : "/") + ops::matmul_backend_name(kLayoutBackends[i]);
  return s + ", read in place by " + (direct.empty() ? "none" : direct);
}

// The key, readable: for warnings and ops::matmul_tunings().
std::string describe(const GemmCall& c) {
  std::ostringstream s;
  s << c.out.device().str() << " " << dtype_name(c.a.dtype()) << "->" << dtype_name(c.out.dtype()) << " "
    << shape_str(c.out.shape()) << " = " << shape_str(c.a.shape()) << " @ " << shape_str(c.b.shape()) << "; a "
    << layout_text(c.a, false) << "; b " << layout_text(c.b, true);
  if (c.has_epilogue()) {
    s << "; epilogue";
    if (c.bias.defined()) s << " bias";
    if (c.act != Activation::none) s << " gelu";
    if (c.pre.defined()) s << " pre";
  }
  return s.str();
}

struct Cache {
  std::mutex mutex;
  std::map<Key, ops::MatmulTuning> by_key;
  std::vector<Key> order;  // keys, oldest first
  GemmTunerTestHooks hooks;
};
Cache& cache() {
  static Cache* c = new Cache;  // leaked: pipeline threads may still run matmuls while statics die at exit
  return *c;
}
std::atomic<int64_t> g_tunings{0};

// Waits for everything queued so far on out's stream, at most kWaitSeconds; throws naming `what`.
void wait_bounded(const GemmCall& call, const std::string& what) {
  const Device device = call.out.device();
  const Event done = Event::create(device);
  done.record(current_stream(device));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kWaitSeconds);
  while (!done.query()) {
    BRIGADE_CHECK(std::chrono::steady_clock::now() < deadline, "matmul (tuned): ", what, " did not finish within ",
                  kWaitSeconds, " s; the GPU may be hung by it");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void warn(MatmulBackend backend, const std::string& problem, const std::string& why) {
  std::cerr << "brigade: matmul (tuned): not using " << ops::matmul_backend_name(backend) << " for " << problem << ": "
            << why << "\n";
}

// Measures every candidate for `call` and returns the fastest that agreed with cuBLAS; call.out holds
// some candidate's output afterwards (the caller runs the winner last).
ops::MatmulTuning tune(const GemmCall& call, const std::vector<GemmCandidate>& candidates, const GemmTimer& timer) {
  const std::string problem = describe(call);
  ops::MatmulTuning t;
  t.problem = problem;
  std::vector<std::pair<MatmulBackend, double>> times;

  const GemmCandidate& reference = candidates.front();  // cuBLAS (checked by the caller)
  reference.run(call);
  wait_bounded(call, "cublas");
  const GemmReference ref = gemm_reference(call);
  times.emplace_back(reference.backend, timer(reference.backend, [&] { reference.run(call); }));

  for (size_t i = 1; i < candidates.size(); ++i) {
    const GemmCandidate& c = candidates[i];
    const std::string name = ops::matmul_backend_name(c.backend);
    std::string why;
    try {
      c.run(call);  // the run that is checked; the timer warms up and times runs of its own
      wait_bounded(call, name);
      why = gemm_disagreement(ref, call);
      if (why.empty()) times.emplace_back(c.backend, timer(c.backend, [&] { c.run(call); }));
    } catch (const Error& e) {
      why = std::string("it failed: ") + e.what();
    }
    if (!why.empty()) {
      warn(c.backend, problem, why);
      t.excluded.push_back(c.backend);
    }
  }
  t.ms = times;
  t.chosen = std::min_element(times.begin(), times.end(), [](const auto& x, const auto& y) {
               return x.second < y.second;
             })->first;
  g_tunings.fetch_add(1);
  return t;
}

}  // namespace

std::vector<GemmCandidate> default_gemm_candidates(const GemmCall& call) {
  auto on = [](MatmulBackend backend) {
    return GemmCandidate{backend, [backend](const GemmCall& c) { run_gemm(c, backend); }};
  };
  std::vector<GemmCandidate> list = {on(MatmulBackend::cublas)};
  if (is_half(call.a.dtype())) {
    list.push_back(on(MatmulBackend::tensor_core));
    if (hopper_gemm_available()) list.push_back(on(MatmulBackend::hopper));
  }
  return list;
}

double time_with_events(MatmulBackend backend, const std::function<void()>& run_once) {
  int device = 0;
  BRIGADE_CUDA_CHECK(cudaGetDevice(&device));
  const Device d = Device::cuda(device);
  const Stream stream = current_stream(d);
  run_once();  // warm-up: first-launch costs (handles, descriptors, caches) are not the GEMM's
  std::vector<std::pair<Event, Event>> marks;
  for (int r = 0; r < kTimedRuns; ++r) {
    marks.emplace_back(Event::create(d, true), Event::create(d, true));
    marks.back().first.record(stream);
    run_once();
    marks.back().second.record(stream);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kWaitSeconds);
  while (!marks.back().second.query()) {
    BRIGADE_CHECK(std::chrono::steady_clock::now() < deadline, "matmul (tuned): timing ",
                  ops::matmul_backend_name(backend), " did not finish within ", kWaitSeconds, " s");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  std::vector<double> ms;
  for (const auto& [start, stop] : marks) ms.push_back(start.elapsed_ms(stop));
  std::nth_element(ms.begin(), ms.begin() + kTimedRuns / 2, ms.end());
  return ms[kTimedRuns / 2];
}

void gemm_tuned(const GemmCall& call) {
  // Nothing to measure: an empty product is a memset on every backend.
  if (call.out.numel() == 0 || call.a.size(-1) == 0) return run_gemm(call, MatmulBackend::cublas);
  const Key key = problem_key(call);
  GemmTunerTestHooks hooks;
  std::optional<MatmulBackend> chosen;
  {
    std::lock_guard<std::mutex> lock(cache().mutex);
    hooks = cache().hooks;
    if (auto it = cache().by_key.find(key); it != cache().by_key.end()) chosen = it->second.chosen;
  }
  auto candidates = [&] {
    std::vector<GemmCandidate> list = hooks.candidates ? hooks.candidates(call) : default_gemm_candidates(call);
    BRIGADE_CHECK(!list.empty() && list.front().backend == MatmulBackend::cublas,
                  "matmul (tuned): the candidate list must start with cublas, the reference");
    return list;
  };
  // The usual path: the choice is cached (a test's candidates run as they are; a cached choice they
  // no longer list runs as itself).
  if (chosen && !hooks.candidates) return run_gemm(call, *chosen);
  const std::vector<GemmCandidate> list = candidates();
  if (!chosen) {
    if (list.size() == 1) return list.front().run(call);  // nothing to choose (f32, f64)
    if (is_capturing(stream_for(call.out))) return list.front().run(call);  // no timing in a graph; not cached
    ops::MatmulTuning t = tune(call, list, hooks.timer ? hooks.timer : GemmTimer(time_with_events));
    std::lock_guard<std::mutex> lock(cache().mutex);
    // Another thread may have tuned the same key meanwhile: the first result stays, for every caller.
    auto [it, inserted] = cache().by_key.emplace(key, std::move(t));
    if (inserted) cache().order.push_back(key);
    chosen = it->second.chosen;
  }
  // Last: out (and pre) hold the winner's own bits.
  for (const GemmCandidate& c : list)
    if (c.backend == *chosen) return c.run(call);
  run_gemm(call, *chosen);
}

void set_gemm_tuner_test_hooks(GemmTunerTestHooks hooks) {
  std::lock_guard<std::mutex> lock(cache().mutex);
  cache().hooks = std::move(hooks);
}

}  // namespace brigade::cuda

namespace brigade::ops {

std::vector<MatmulTuning> matmul_tunings() {
  cuda::Cache& c = cuda::cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::vector<MatmulTuning> list;
  for (const cuda::Key& key : c.order) list.push_back(c.by_key.at(key));
  return list;
}

int64_t matmul_tuning_count() { return cuda::g_tunings.load(); }

void clear_matmul_tunings() {
  cuda::Cache& c = cuda::cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.by_key.clear();
  c.order.clear();
}

}  // namespace brigade::ops
