// One cross-backend test case: run an op on the CPU and on the GPU with the same inputs (and the same
// upstream gradient), then compare every output and every input gradient.
//
// A case is data — which op, which inputs (shape, dtype, values, memory layout), how close the
// results must be — so the list in test_gpu_ops.cpp reads as a coverage table. Each case becomes its
// own Catch2 test, named "op: details" and tagged [gpu_ops][op], so
//
//     test_gpu_ops --list-tests          shows what is covered
//     test_gpu_ops "[matmul]"            runs one op's cases
//
// The CPU kernels are the reference. The GPU side runs with the guarded allocator (fresh memory is
// NaN, guards around every block), so out-of-bounds writes and unwritten outputs fail the case.
#pragma once

#if BRIGADE_HAVE_CUDA

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "brigade.h"
#include "kernels/ops.h"
#include "compare.h"
#include "guarded_allocator.h"

namespace gpu_test {

using namespace brigade;

// ---- inputs ----

enum class Values {
  normal,    // N(0, scale²)
  positive,  // uniform in [0.5, 2): for log, sqrt, rsqrt, pow and divisors
  indices,   // integers uniform in [0, range)
  targets,   // like indices, with about one in eight set to kIgnoreIndex
  mask,      // 0 or 1, half each
};

// How the input sits in memory. Every layout holds the same logical values, so the CPU and GPU see
// identical tensors; the GPU kernel must handle each through its strides.
enum class Layout {
  contiguous,
  transposed,  // stored with the last two dims swapped, viewed back through transpose(-1, -2)
  strided,     // every other element of a buffer twice as wide (slice with step 2 on the last dim)
  offset,      // contiguous, but starting one element into its storage: breaks 16-byte alignment
  expanded,    // dim 0 stored with size 1 and expanded (stride 0): a broadcast operand
};

inline constexpr int64_t kIgnoreIndex = -100;

struct Input {
  Shape shape;
  DType dtype = DType::f32;
  Layout layout = Layout::contiguous;
  Values values = Values::normal;
  int64_t range = 0;    // indices and targets: values in [0, range)
  double scale = 1.0;   // normal: the standard deviation
  double shift = 0.0;   // normal: the mean
  bool grad = true;     // floating inputs: a leaf that requires grad, whose gradient is compared

  Input& as(Layout l) { layout = l; return *this; }
  Input& scaled(double s) { scale = s; return *this; }
  Input& shifted(double m) { shift = m; return *this; }
  Input& no_grad() { grad = false; return *this; }
  bool floating() const { return is_floating(dtype); }
};

inline Input floats(Shape shape, DType dtype, Layout layout = Layout::contiguous) {
  return Input{std::move(shape), dtype, layout};
}
inline Input positives(Shape shape, DType dtype, Layout layout = Layout::contiguous) {
  return Input{std::move(shape), dtype, layout, Values::positive};
}
inline Input indices(Shape shape, int64_t range, DType dtype = DType::i64) {
  return Input{std::move(shape), dtype, Layout::contiguous, Values::indices, range, 1.0, 0.0, false};
}
inline Input targets(Shape shape, int64_t classes, DType dtype = DType::i64) {
  return Input{std::move(shape), dtype, Layout::contiguous, Values::targets, classes, 1.0, 0.0, false};
}
inline Input mask(Shape shape, DType dtype = DType::i32) {
  return Input{std::move(shape), dtype, Layout::contiguous, Values::mask, 0, 1.0, 0.0, false};
}

// ---- cases ----

// Runs the op under test; gets the inputs (already in their layout, on the device under test) and
// returns its outputs. Differentiable functions record on the active tape.
using OpFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

struct OpCase {
  std::string op;      // the op's name and Catch2 tag: "matmul"
  std::string detail;  // what distinguishes this case; the inputs are described automatically
  std::vector<Input> inputs;
  OpFn run;
  Tolerance tol;
  bool backward = true;  // also compare the gradients of every input with grad
  // Optional: state held while the GPU side runs — e.g. a matmul backend selection.
  std::function<std::shared_ptr<void>()> gpu_setup;
};

// A case whose tolerance follows the dtype of its first floating input.
inline OpCase make_case(std::string op, std::vector<Input> inputs, OpFn run, Accuracy accuracy,
                        std::string detail = "") {
  DType dtype = DType::f32;
  for (const Input& in : inputs)
    if (in.floating()) {
      dtype = in.dtype;
      break;
    }
  OpCase c{std::move(op), std::move(detail), std::move(inputs), std::move(run), tolerance(accuracy, dtype), true, {}};
  return c;
}

// Results that must be bit-for-bit the CPU's: copies, conversions, fills.
inline constexpr Tolerance kExact{0.0, 0.0};

// A size for randomly shaped cases: mostly awkward ones (1, primes, one past a power of two), so tile
// and vector-width edges are hit.
inline int64_t random_size(std::mt19937_64& rng, int64_t max = 300) {
  static const int64_t awkward[] = {1, 2, 3, 5, 7, 17, 31, 33, 63, 65, 127, 129, 255, 257};
  if (rng() % 2) return awkward[rng() % (sizeof(awkward) / sizeof(awkward[0]))];
  return 1 + int64_t(rng() % uint64_t(max));
}

inline std::string shape_text(const Shape& s) {
  if (s.empty()) return "scalar";
  std::string out = std::to_string(s[0]);
  for (size_t i = 1; i < s.size(); ++i) out.append("x").append(std::to_string(s[i]));
  return out;
}

inline std::string layout_text(Layout l) {
  switch (l) {
    case Layout::contiguous: return "";
    case Layout::transposed: return " transposed";
    case Layout::strided: return " strided";
    case Layout::offset: return " offset";
    case Layout::expanded: return " expanded";
  }
  return "";
}

// "bf16 33x17 transposed; i64 5" — no brackets or commas, which Catch2 would read as tags or
// alternatives on its command line.
inline std::string describe(const std::vector<Input>& inputs) {
  std::string out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    out += (i ? "; " : "") + std::string(dtype_name(inputs[i].dtype)) + " " + shape_text(inputs[i].shape) +
           layout_text(inputs[i].layout);
  }
  return out;
}

inline std::string case_name(const OpCase& c) {
  std::string name = c.op + ": " + describe(c.inputs);
  if (!c.detail.empty()) name += " (" + c.detail + ")";
  return name;
}

// ---- seeds ----

// One seed per run, printed, so a failure can be replayed: BRIGADE_TEST_SEED=<seed> test_gpu_ops ...
inline uint64_t run_seed() {
  static const uint64_t seed = [] {
    if (const char* env = std::getenv("BRIGADE_TEST_SEED")) return uint64_t(std::strtoull(env, nullptr, 10));
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ rd();
  }();
  return seed;
}

// Each case's data depends only on the run seed and the case's name (FNV-1a), so running one case
// alone reproduces what it saw in the full run.
inline uint64_t case_seed(const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ run_seed();
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return h;
}

inline void announce_seed_once() {
  static bool done = [] {
    std::cout << "test_gpu_ops: seed " << run_seed() << " (set BRIGADE_TEST_SEED=" << run_seed()
              << " to repeat this run)" << std::endl;
    return true;
  }();
  (void)done;
}

// ---- building inputs ----

// The shape of the storage a layout needs for a logical shape.
inline Shape stored_shape(const Input& in) {
  Shape s = in.shape;
  switch (in.layout) {
    case Layout::contiguous: break;
    case Layout::transposed:
      if (s.size() >= 2) std::swap(s[s.size() - 1], s[s.size() - 2]);
      break;
    case Layout::strided:
      if (!s.empty()) s.back() *= 2;
      break;
    case Layout::offset: return {shape_numel(s) + 1};
    case Layout::expanded:
      if (!s.empty()) s[0] = 1;
      break;
  }
  return s;
}

// The logical input as a view of its storage.
inline Tensor view_in_layout(const Tensor& stored, const Input& in) {
  switch (in.layout) {
    case Layout::contiguous: return stored;
    case Layout::transposed: return in.shape.size() >= 2 ? stored.transpose(-1, -2) : stored;
    case Layout::strided: return in.shape.empty() ? stored : stored.slice(-1, 0, stored.size(-1), 2);
    case Layout::offset: return stored.narrow(0, 1, shape_numel(in.shape)).view(in.shape);
    case Layout::expanded: return in.shape.empty() ? stored : stored.expand(in.shape);
  }
  return stored;
}

// Fresh values for an input's whole storage, on the CPU.
inline Tensor make_stored(const Input& in, Generator& gen) {
  const Shape shape = stored_shape(in);
  const int64_t n = shape_numel(shape);
  std::vector<double> v(size_t(n), 0.0);
  if (in.values == Values::normal) {
    return ops::to_dtype(ops::scale_shift(randn(shape, DType::f64, Device::cpu(), &gen), in.scale, in.shift), in.dtype);
  }
  const std::vector<double> u = uniform({n}, 0.0, 1.0, DType::f64, Device::cpu(), &gen).to_vector();
  for (size_t i = 0; i < v.size(); ++i) {
    switch (in.values) {
      case Values::positive: v[i] = 0.5 + 1.5 * u[i]; break;
      case Values::indices: v[i] = std::floor(u[i] * double(in.range)); break;
      case Values::targets:
        v[i] = u[i] < 0.125 ? double(kIgnoreIndex) : std::floor((u[i] - 0.125) / 0.875 * double(in.range));
        break;
      case Values::mask: v[i] = u[i] < 0.5 ? 0.0 : 1.0; break;
      case Values::normal: break;
    }
  }
  return from_vector(v, shape, in.dtype);
}

// ---- running a case on one device ----

struct DeviceRun {
  std::vector<Tensor> outputs;
  std::vector<Tensor> grads;  // per input: the gradient of its storage (undefined when none)
};

// Runs `c` on `device` with the given stored inputs (on the CPU). `upstream` holds one gradient per
// output that requires grad; when it is empty (the CPU run), fresh ones are made and returned in it.
inline DeviceRun run_on(const OpCase& c, const std::vector<Tensor>& stored, Device device,
                        std::vector<Tensor>& upstream, Generator& gen) {
  DeviceRun r;
  std::vector<Tensor> leaves, views;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    Tensor leaf = device.is_cpu() ? ops::clone(stored[i]) : stored[i].to(device).detach();
    const bool grad = c.backward && c.inputs[i].grad && c.inputs[i].floating();
    if (grad) leaf.requires_grad_(true);
    leaves.push_back(leaf);
  }
  Tape tape;
  {
    TapeGuard recording(tape);
    for (size_t i = 0; i < c.inputs.size(); ++i) views.push_back(view_in_layout(leaves[i], c.inputs[i]));
    r.outputs = c.run(views);
  }
  r.grads.resize(c.inputs.size());
  if (!c.backward) return r;

  std::vector<Tensor> roots, root_grads;
  const bool make_upstream = upstream.empty();
  for (const Tensor& out : r.outputs) {
    if (!out.defined() || !out.requires_grad()) continue;
    if (make_upstream) upstream.push_back(ops::to_dtype(randn(out.shape(), DType::f64, Device::cpu(), &gen), out.dtype()));
    REQUIRE(roots.size() < upstream.size());  // the GPU run must have as many differentiable outputs
    roots.push_back(out);
    root_grads.push_back(device.is_cpu() ? upstream[roots.size() - 1] : upstream[roots.size() - 1].to(device));
  }
  REQUIRE(roots.size() == upstream.size());
  if (!roots.empty()) tape.backward(roots, root_grads);
  for (size_t i = 0; i < leaves.size(); ++i)
    if (leaves[i].requires_grad()) r.grads[i] = leaves[i].grad();
  return r;
}

// Compares one GPU tensor with its CPU twin: same shape and dtype, GPU-resident, values within tol.
inline void check_matches(const std::string& what, const Tensor& gpu, const Tensor& cpu, Tolerance tol) {
  INFO(what);
  REQUIRE(gpu.defined() == cpu.defined());
  if (!cpu.defined()) return;
  CHECK(gpu.device().is_cuda());
  CHECK(shape_str(gpu.shape()) == shape_str(cpu.shape()));
  CHECK(dtype_name(gpu.dtype()) == std::string(dtype_name(cpu.dtype())));
  if (gpu.shape() != cpu.shape()) return;
  const Tolerance t = is_floating(cpu.dtype()) ? tol : tolerance(Accuracy::elementwise, cpu.dtype());
  std::string why;
  const bool ok = within(compare(gpu.detach().to(Device::cpu()).to_vector(), cpu.to_vector()), t, why);
  if (!ok) FAIL_CHECK(what << ": " << why);
}

// Fails the current test if the guarded allocator saw an out-of-bounds write.
inline void check_guards() {
  GuardedAllocator& g = guarded_allocator();
  g.check_live_blocks();
  for (const std::string& problem : g.take_problems()) FAIL_CHECK(problem);
}

// The whole check for one case.
inline void run_case(const OpCase& c) {
  announce_seed_once();
  const std::string name = case_name(c);
  const uint64_t seed = case_seed(name);
  INFO("case \"" << name << "\", seed " << run_seed());
  guarded_allocator().take_problems();  // start clean
  {
    Generator gen(seed);
    std::vector<Tensor> stored;
    for (const Input& in : c.inputs) stored.push_back(make_stored(in, gen));
    std::vector<Tensor> upstream;
    const DeviceRun cpu = run_on(c, stored, Device::cpu(), upstream, gen);
    DeviceRun gpu;
    {
      std::shared_ptr<void> setup = c.gpu_setup ? c.gpu_setup() : nullptr;
      gpu = run_on(c, stored, Device::cuda(0), upstream, gen);
      device_synchronize(Device::cuda(0));  // surface asynchronous kernel errors inside this case
    }
    REQUIRE(gpu.outputs.size() == cpu.outputs.size());
    for (size_t i = 0; i < cpu.outputs.size(); ++i)
      check_matches("output " + std::to_string(i), gpu.outputs[i], cpu.outputs[i], c.tol);
    for (size_t i = 0; i < cpu.grads.size(); ++i)
      check_matches("gradient of input " + std::to_string(i), gpu.grads[i], cpu.grads[i], c.tol);
  }  // every tensor of the case is freed here, which checks its guards
  check_guards();
}

// ---- registration: one Catch2 test per case ----

class CaseInvoker final : public Catch::ITestInvoker {
 public:
  explicit CaseInvoker(const OpCase* c) : case_(c) {}
  void invoke() const override { run_case(*case_); }

 private:
  const OpCase* case_;
};

// Registers cases as Catch2 tests (call from a static initialiser). Names must be unique; a repeated
// name gets a " #2" suffix rather than Catch2's start-up error.
inline void register_cases(std::vector<OpCase> cases) {
  static std::deque<OpCase> registered;  // stable addresses for the invokers
  static std::set<std::string> names;
  for (OpCase& c : cases) {
    registered.push_back(std::move(c));
    const OpCase& kept = registered.back();
    std::string name = case_name(kept);
    for (int k = 2; names.count(name); ++k) name = case_name(kept) + " #" + std::to_string(k);
    names.insert(name);
    const std::string tags = "[gpu_ops][" + kept.op + "]";
    Catch::AutoReg(new CaseInvoker(&kept), CATCH_INTERNAL_LINEINFO, Catch::StringRef(),
                   Catch::NameAndTags{Catch::StringRef(name), Catch::StringRef(tags)});
  }
}

}  // namespace gpu_test

#endif  // BRIGADE_HAVE_CUDA
