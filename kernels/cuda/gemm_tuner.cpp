// gemm_tuner.h's tuned backend: the key, the cache, the measurement and the bounded waits.
#include "kernels/cuda/gemm_tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
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
// and which of the first 48 batch dims broadcast (a bit each from bit 8) — what changes a backend's
// cost or path, in a form describe() can print.
int64_t layout_class(const Tensor& x, bool is_b) {
  const int64_t along_k = x.stride(is_b ? -2 : -1), other = x.stride(is_b ? -1 : -2);
  int64_t code = along_k == 1 ? 0 : other == 1 ? 1 : 2;
  for (size_t i = 0; i < std::size(kLayoutBackends); ++i)
    if (reads_in_place(x, is_b, kLayoutBackends[i])) code |= int64_t(1) << (2 + i);
  for (int64_t d = 0; d < std::min<int64_t>(x.dim() - 2, 48); ++d)  // 8 + 48 bits: no shift past int64_t
    if (x.stride(d) == 0 && x.size(d) > 1) code |= int64_t(1) << (8 + d);
  return code;
}

// The key: everything that decides which candidates can run, which path run_gemm takes for each
// (copies, collapsed batch dims, the launches) and what they cost. Compact, since every tuned call
// looks it up: device, dtypes, k, each operand's layout class (alignment, which backends read it in
// place), the epilogue, out's shape (m, n and the batch dims) and every stride of a and b — so a
// cached choice was always checked on this very path (the synthetic operands have these strides).
using Key = std::vector<int64_t>;
Key problem_key(const GemmCall& c) {
  Key key = {c.out.device().index,   int64_t(c.a.dtype()),      int64_t(c.out.dtype()),   c.a.size(-1),
             layout_class(c.a, false), layout_class(c.b, true), int64_t(c.bias.defined()), int64_t(c.act),
             int64_t(c.pre.defined())};
  key.insert(key.end(), c.out.shape().begin(), c.out.shape().end());
  key.insert(key.end(), c.a.strides().begin(), c.a.strides().end());
  key.insert(key.end(), c.b.strides().begin(), c.b.strides().end());
  return key;
}

std::string layout_text(const Tensor& x, bool is_b) {
  const int64_t code = layout_class(x, is_b);
  std::string s = code % 4 == 0 ? "k-contiguous" : code % 4 == 1 ? (is_b ? "n-contiguous" : "m-contiguous") : "strided";
  std::string broadcast;
  for (int64_t d = 0; d < x.dim() - 2; ++d) broadcast += x.stride(d) == 0 && x.size(d) > 1 ? 'b' : '.';
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

// Below this many flops (2 m n k x batch) a call is not tuned: cuBLAS runs it, and nothing is cached.
// 2²⁷ flops (a 512³ GEMM) take well under 10 µs on any tensor-core GPU this targets (about 0.2 µs of
// arithmetic on an H100 at its bf16 rate), so every candidate is bound by launch latency and the
// choice can save microseconds, while tuning costs milliseconds and a host-side check; and the small
// shapes are the ones that change all the time (a KV-cache's attention makes a new key every token).
constexpr double kMinTunedFlops = double(int64_t(1) << 27);
// At most this many keys are cached; a new key beyond them runs on cuBLAS, untuned and uncached, so
// a program that keeps making new shapes neither grows memory without end nor tunes forever.
constexpr size_t kMaxTunedKeys = 1024;
// Tuning is serialised per device (see gemm_tuner.h); devices beyond this share their locks.
constexpr int kDeviceLocks = 64;

struct Cache {
  std::mutex mutex;  // guards the fields below; never held while a GEMM runs
  std::map<Key, ops::MatmulTuning> by_key;
  std::vector<Key> order;  // keys, oldest first
  GemmTunerTestHooks hooks;
  std::mutex tuning[kDeviceLocks];  // held while a device's candidates are measured
};
Cache& cache() {
  static Cache* c = new Cache;  // leaked: pipeline threads may still run matmuls while statics die at exit
  return *c;
}
std::atomic<int64_t> g_tunings{0};
std::atomic<bool> g_hooks_set{false};  // read without the lock, so untunable calls take no lock

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

// Whether an error thrown while launching a candidate is a fault of the GPU or of the CUDA context
// (an illegal address, a launch failure, anything sticky): those must reach the user — the context
// may be unusable, and a later GEMM would fail or hang anyway. Only an ordinary refusal (a launcher
// that does not take this shape) just excludes the candidate.
bool is_cuda_fault(const Error& e) {
  return cudaPeekAtLastError() != cudaSuccess || std::string(e.what()).rfind("CUDA error:", 0) == 0;
}

// The caching allocator's message when the device has no room (core/cuda/caching_allocator.cpp).
bool is_out_of_memory(const Error& e) { return std::string(e.what()).find("out of memory") != std::string::npos; }

// Measures every candidate for `call` and returns the fastest that passed gemm_agreement.h's exact
// check on synthetic operands. Timing runs on the real operands: the check does not need them, but
// the timing should see the user's own buffers (and needs no second set of outputs); call.out holds
// some candidate's output afterwards (the caller runs the winner last). A candidate that hangs past
// kWaitSeconds, or faults the GPU, throws: it is not merely excluded.
ops::MatmulTuning tune(const GemmCall& call, const GemmCall& check, const std::vector<GemmCandidate>& candidates,
                       const GemmTimer& timer) {
  const std::string problem = describe(call);
  ops::MatmulTuning t;
  t.problem = problem;
  std::vector<std::pair<MatmulBackend, double>> times;

  const GemmCandidate& reference = candidates.front();  // cuBLAS (checked by the caller)
  fill_nan(check);
  reference.run(check);
  wait_bounded(check, "cublas");
  const GemmReference ref = gemm_reference(check);
  times.emplace_back(reference.backend, timer(reference.backend, [&] { reference.run(call); }));

  for (size_t i = 1; i < candidates.size(); ++i) {
    const GemmCandidate& c = candidates[i];
    const std::string name = ops::matmul_backend_name(c.backend);
    std::string why;
    fill_nan(check);  // an element the candidate does not write stays NaN, and disagrees
    try {
      c.run(check);  // the run that is checked; the timer warms up and times runs of its own
    } catch (const Error& e) {
      if (is_cuda_fault(e) || is_out_of_memory(e)) throw;  // out of memory: gemm_tuned runs cuBLAS, uncached
      why = std::string("it failed: ") + e.what();
    }
    if (why.empty()) {
      wait_bounded(check, name);  // a hang throws
      why = gemm_disagreement(ref, check);
    }
    if (why.empty()) times.emplace_back(c.backend, timer(c.backend, [&] { c.run(call); }));
    else {
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
    if (ops::matmul_backend_available(MatmulBackend::hopper, call.out.device()))
      list.push_back(on(MatmulBackend::hopper));
  }
  return list;
}

double time_with_events(Device device, MatmulBackend backend, const std::function<void()>& run_once) {
  const Stream stream = current_stream(device);
  run_once();  // warm-up: first-launch costs (handles, descriptors, caches) are not the GEMM's
  std::vector<std::pair<Event, Event>> marks;
  for (int r = 0; r < kTimedRuns; ++r) {
    marks.emplace_back(Event::create(device, true), Event::create(device, true));
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
  // Nothing to measure: an empty product is a memset on every backend; f32 and f64 have one
  // candidate (unless a test lists more); k past the exact check's reach stays on cuBLAS.
  const int64_t k = call.a.size(-1);
  if (call.out.numel() == 0 || k == 0 || k > kMaxCheckedK || (!is_half(call.a.dtype()) && !g_hooks_set.load()))
    return run_gemm(call, MatmulBackend::cublas);
  GemmTunerTestHooks hooks;
  {
    std::lock_guard<std::mutex> lock(cache().mutex);
    hooks = cache().hooks;
  }
  const double min_flops = hooks.min_flops >= 0 ? hooks.min_flops : kMinTunedFlops;
  if (2.0 * double(call.out.numel()) * double(k) < min_flops) return run_gemm(call, MatmulBackend::cublas);
  const Key key = problem_key(call);
  auto cached = [&]() -> std::optional<MatmulBackend> {
    std::lock_guard<std::mutex> lock(cache().mutex);
    if (auto it = cache().by_key.find(key); it != cache().by_key.end()) return it->second.chosen;
    return std::nullopt;
  };
  std::optional<MatmulBackend> chosen = cached();
  // The usual path: the choice is cached (a test's candidates run as they are; a cached choice they
  // no longer list runs as itself).
  if (chosen && !hooks.candidates) return run_gemm(call, *chosen);
  std::vector<GemmCandidate> list = hooks.candidates ? hooks.candidates(call) : default_gemm_candidates(call);
  BRIGADE_CHECK(!list.empty() && list.front().backend == MatmulBackend::cublas,
                "matmul (tuned): the candidate list must start with cublas, the reference");
  if (!chosen) {
    if (list.size() == 1) return list.front().run(call);                    // nothing to choose
    if (is_capturing(stream_for(call.out))) return list.front().run(call);  // no timing in a graph; not cached
    const Device device = call.out.device();
    // One tuning at a time per device: a single-process pipeline runs every rank's thread on one GPU,
    // and candidates measured side by side would time each other.
    std::unique_lock<std::mutex> tuning(cache().tuning[std::max(0, device.index) % kDeviceLocks]);
    chosen = cached();  // another thread may have tuned this key while this one waited
    if (!chosen) {
      {
        std::lock_guard<std::mutex> lock(cache().mutex);
        const size_t max_keys = hooks.max_keys >= 0 ? size_t(hooks.max_keys) : kMaxTunedKeys;
        if (cache().by_key.size() >= max_keys) return run_gemm(call, MatmulBackend::cublas);
      }
      const GemmTimer timer = hooks.timer ? hooks.timer : GemmTimer([device](MatmulBackend b, const std::function<void()>& f) {
        return time_with_events(device, b, f);
      });
      // The synthetic operands and outputs, the reference's f32 product and a candidate's operand
      // copies all need memory the user's program did not plan for: without it, cuBLAS runs the
      // call and nothing is cached, so a later call may tune the key when memory is free.
      ops::MatmulTuning t;
      try {
        t = tune(call, synthetic_call(call), list, timer);
      } catch (const Error& e) {
        if (!is_out_of_memory(e)) throw;
        std::cerr << "brigade: matmul (tuned): no memory to tune " << describe(call)
                  << "; running cuBLAS (not cached): " << e.what() << "\n";
        return run_gemm(call, MatmulBackend::cublas);
      }
      std::lock_guard<std::mutex> lock(cache().mutex);
      // clear_matmul_tunings() may run meanwhile, and another device's key is another key: the
      // result is inserted unless the key is there already, and if it is, a backend this thread
      // just excluded is not run.
      auto [it, inserted] = cache().by_key.emplace(key, t);
      if (inserted) cache().order.push_back(key);
      chosen = it->second.chosen;
      if (std::find(t.excluded.begin(), t.excluded.end(), *chosen) != t.excluded.end()) chosen = t.chosen;
    }
  }
  // Last: out (and pre) hold the winner's own bits.
  for (const GemmCandidate& c : list)
    if (c.backend == *chosen) return c.run(call);
  run_gemm(call, *chosen);
}

void set_gemm_tuner_test_hooks(GemmTunerTestHooks hooks) {
  std::lock_guard<std::mutex> lock(cache().mutex);
  g_hooks_set = bool(hooks.candidates) || bool(hooks.timer) || hooks.min_flops >= 0 || hooks.max_keys >= 0;
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
