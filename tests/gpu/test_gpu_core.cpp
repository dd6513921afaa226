// The CUDA core on a real GPU: the caching allocator, streams and events, copies between devices
// and dtypes, device random numbers, Tensor::to's gradient. Every comparison with the CPU is bitwise
// (copies and random numbers must produce exactly the CPU's bits).
#include <catch2/catch.hpp>

// Without CUDA the runner (tests/gpu_main.cpp) skips before any test runs, and there is no CUDA
// runtime to compile against.
#if BRIGADE_HAVE_CUDA

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "brigade.h"
#include "kernels/ops.h"
#include "core/stream.h"

using namespace brigade;

namespace {

const Device kGpu = Device::cuda(0);

// 64 MiB of f32 keeps a GPU stream busy long enough for a missing wait to show. The CPU emulator
// runs every kernel as it is issued (no race can show there) at ~60 ns a thread, so it gets 256 KiB.
#if BRIGADE_CUDA_EMULATOR
constexpr int64_t kBusyElements = int64_t(1) << 16;
#else
constexpr int64_t kBusyElements = int64_t(1) << 24;
#endif
const Device kCpu = Device::cpu();
const DType kAllDTypes[] = {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64};
const DType kFloatDTypes[] = {DType::f32, DType::f64, DType::bf16, DType::f16};

// The raw bytes of a tensor's elements in row-major order (copied to the host first).
std::vector<unsigned char> bytes_of(const Tensor& t) {
  Tensor host = ops::contiguous(t.device().is_cpu() ? t : t.detach().to(kCpu));
  const auto* p = static_cast<const unsigned char*>(host.raw_data());
  return std::vector<unsigned char>(p, p + host.nbytes());
}

// Bitwise equality (NaN payloads and the sign of zero included), with the first difference named.
void require_same_bits(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  std::vector<unsigned char> g = bytes_of(got), w = bytes_of(want);
  if (g == w) return;
  size_t i = 0;
  while (g[i] == w[i]) ++i;
  const size_t element = i / got.element_size();
  std::vector<double> gv = got.to_vector(), wv = want.to_vector();
  FAIL("first different element: " << element << " of " << gv.size() << " (got " << gv[element] << ", want "
                                    << wv[element] << ")");
}

// Values for converting src -> dst that the conversion defines (float -> int of NaN, infinity or an
// out-of-range value is undefined behaviour in C++): random ones of many magnitudes; for float pairs
// the special values (NaN, infinities, -0, subnormals, ties, f16 overflow); the extremes of i32 and
// large i64 values where both types hold them exactly.
std::vector<double> conversion_values(DType src, DType dst, int64_t n, uint64_t seed) {
  std::vector<double> v;
  if (is_floating(dst) && is_floating(src)) {
    v = {0.0, -0.0, 1.0, -1.0, 0.5, 65504, 65519, 65520, 1e-8, 5.960464477539063e-08, 2.98e-08, 1e38, -3e38,
         1.00390625, 1 + std::ldexp(1.0, -11), 1 + 3 * std::ldexp(1.0, -11), std::nan(""), -INFINITY, INFINITY,
         1e300, 1e-300};
  }
  const bool exact_source = src == DType::f64 || src == DType::i32 || src == DType::i64;
  if ((src == DType::f64 || src == DType::i64) && dst != DType::i32) {
    for (double x : {9007199254740992.0, 1152921504606846976.0, -4611686018427387904.0}) v.push_back(x);  // 2^53, 2^60, -2^62
  }
  if (exact_source) {
    for (double x : {2147483647.0, -2147483648.0}) v.push_back(x);
  }
  // Above 65504 an f16 source holds infinity, which no integer destination can take.
  const double cap = src == DType::f16 && is_integral(dst) ? 6e4 : 1e300;
  Generator gen(seed);
  std::vector<double> r = randn({n}, DType::f64, kCpu, &gen).to_vector();
  for (size_t i = 0; v.size() < size_t(n); ++i) {
    double x = r[i] * std::pow(10.0, double(i % 7));  // magnitudes up to ~1e6
    if (is_integral(src) || is_integral(dst)) x = std::trunc(x);
    v.push_back(std::max(-cap, std::min(cap, x)));
  }
  v.resize(size_t(n));
  return v;
}

// A CPU tensor of `dtype` holding `values` (converted by the CPU) — the reference source.
Tensor host_tensor(const std::vector<double>& values, const Shape& shape, DType dtype) {
  return ops::to_dtype(from_vector(values, shape, DType::f64), dtype);
}

// The same geometry on both devices: every other column of a buffer twice as wide.
Tensor strided_view(const Tensor& buffer) { return buffer.slice(-1, 0, buffer.size(-1), 2); }

int64_t free_gpu_bytes() {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return 0;
  return int64_t(free_bytes);
}

}  // namespace

// ---- the caching allocator ------------------------------------------------------------------------

TEST_CASE("gpu allocator: a freed block is reused on the same stream, not on another", "[gpu][allocator]") {
  device_synchronize(kGpu);
  cuda_empty_cache();  // no blocks cached by earlier tests (a new stream may reuse an old handle)
  Stream a = Stream::create(kGpu), b = Stream::create(kGpu);
  void* first = nullptr;
  size_t mallocs = 0;
  {
    StreamGuard on_a(a);
    Tensor t = empty({1000}, DType::f32, kGpu);
    first = t.raw_data();
    mallocs = cuda_memory_stats(kGpu).cuda_mallocs;
  }  // freed: cached for stream a
  {
    StreamGuard on_a(a);
    Tensor t = empty({1000}, DType::f32, kGpu);
    REQUIRE(t.raw_data() == first);
    REQUIRE(cuda_memory_stats(kGpu).cuda_mallocs == mallocs);
  }
  {
    StreamGuard on_b(b);
    Tensor t = empty({1000}, DType::f32, kGpu);
    REQUIRE(t.raw_data() != first);
    REQUIRE(cuda_memory_stats(kGpu).cuda_mallocs == mallocs + 1);
  }
}

TEST_CASE("gpu allocator: record_stream holds a freed block until the other stream passes it", "[gpu][allocator]") {
  device_synchronize(kGpu);
  cuda_empty_cache();
  Stream a = Stream::create(kGpu), b = Stream::create(kGpu);
  const int64_t n = kBusyElements;  // stream b stays busy for a while
  void* block = nullptr;
  {
    StreamGuard on_a(a);
    Tensor t = empty({n}, DType::f32, kGpu);
    block = t.raw_data();
    Event made = Event::create(kGpu);
    made.record(a);
    b.wait(made);
    {
      StreamGuard on_b(b);
      for (int i = 0; i < 50; ++i) ops::fill_(t, double(i));
    }
    record_stream(t, b);
  }  // t dies while b may still be writing it
  {
    StreamGuard on_a(a);
    Tensor u = empty({n}, DType::f32, kGpu);
    // Nothing was queued on b after the free, so "b still busy" means its event has not passed.
    if (!b.query()) REQUIRE(u.raw_data() != block);
  }
  b.synchronize();
  {
    StreamGuard on_a(a);
    Tensor w = empty({n}, DType::f32, kGpu);
    REQUIRE(w.raw_data() == block);  // back in circulation, and freed last: first in line
  }
  REQUIRE_THROWS_WITH(record_stream(tensor({1.0}), b), Catch::Contains("expected a GPU tensor"));
}

TEST_CASE("gpu allocator: statistics, peak and empty_cache", "[gpu][allocator]") {
  device_synchronize(kGpu);
  cuda_empty_cache();
  const CudaMemoryStats before = cuda_memory_stats(kGpu);
  REQUIRE(before.reserved == before.allocated);  // nothing cached after empty_cache
  reset_peak_memory(kGpu);
  REQUIRE(cuda_memory_stats(kGpu).peak_allocated == before.allocated);
  {
    Tensor t = empty({1 << 20}, DType::f32, kGpu);  // 4 MiB
    CudaMemoryStats s = cuda_memory_stats(kGpu);
    REQUIRE(s.allocated == before.allocated + (4 << 20));
    REQUIRE(s.reserved >= s.allocated);
    REQUIRE(s.peak_allocated == s.allocated);
  }
  CudaMemoryStats after = cuda_memory_stats(kGpu);
  REQUIRE(after.allocated == before.allocated);
  REQUIRE(after.reserved >= before.reserved + (4 << 20));  // cached, not given back
  REQUIRE(after.peak_allocated == before.allocated + (4 << 20));
  cuda_empty_cache();
  REQUIRE(cuda_memory_stats(kGpu).reserved == before.reserved);
}

// Tagged [oom]: under compute-sanitizer the failed cudaMalloc itself counts as an error, so the
// sanitizer runs exclude it ("~[oom]", scripts/gpu-session.sh).
TEST_CASE("gpu allocator: an impossible size throws out of memory, and the allocator still works",
          "[gpu][allocator][oom]") {
  const int64_t elements = int64_t(1) << 42;  // 16 TiB of f32
  try {
    Tensor t = empty({elements}, DType::f32, kGpu);
    FAIL("allocating 16 TiB succeeded");
  } catch (const Error& e) {
    const std::string what = e.what();
    INFO(what);
    REQUIRE(what.find("out of memory on cuda:0: tried to allocate 16.00 TiB;") == 0);
    REQUIRE(what.find("allocated by tensors") != std::string::npos);
    REQUIRE(what.find("reserved") != std::string::npos);
    REQUIRE(what.find(" free of ") != std::string::npos);
  }
  REQUIRE(cudaGetLastError() == cudaSuccess);  // no sticky error left behind
  Tensor ok = ops::to_dtype(tensor({1, 2, 3}).to(kGpu), DType::f64);
  REQUIRE(ok.to_vector() == std::vector<double>{1, 2, 3});
}

// ---- streams and events ---------------------------------------------------------------------------

TEST_CASE("gpu streams: current stream, guards nest and set the device", "[gpu][stream]") {
  Stream base = current_stream(kGpu);
  REQUIRE(base == Stream::default_for(kGpu));
  REQUIRE(base.device() == kGpu);
  Stream s1 = Stream::create(kGpu), s2 = Stream::create(kGpu);
  REQUIRE(s1 != s2);
  REQUIRE(s1 != base);
  {
    StreamGuard g1(s1);
    REQUIRE(current_stream(kGpu) == s1);
    int device = -1;
    REQUIRE(cudaGetDevice(&device) == cudaSuccess);
    REQUIRE(device == 0);
    {
      StreamGuard g2(s2);
      REQUIRE(current_stream(kGpu) == s2);
    }
    REQUIRE(current_stream(kGpu) == s1);
  }
  REQUIRE(current_stream(kGpu) == base);

  // Another thread has its own current stream.
  Stream seen_by_thread;
  {
    StreamGuard g1(s1);
    std::thread([&] { seen_by_thread = current_stream(kGpu); }).join();
  }
  REQUIRE(seen_by_thread == base);

  REQUIRE_THROWS_WITH(Stream::create(Device::cuda(cuda_device_count())), Catch::Contains("is not available"));
  REQUIRE_THROWS_WITH(StreamGuard(Stream()), Catch::Contains("undefined"));
  s1.synchronize();
  REQUIRE(s1.query());
}

TEST_CASE("gpu streams: an event orders work between two streams", "[gpu][stream]") {
  Stream producer = Stream::create(kGpu), consumer = Stream::create(kGpu);
  const int64_t n = kBusyElements;  // each fill takes long enough that a race would show
  Tensor x;
  {
    StreamGuard g(producer);
    x = empty({n}, DType::f32, kGpu);
    for (int i = 1; i <= 20; ++i) ops::fill_(x, double(i));  // the last write leaves 20 everywhere
  }
  Event ready = Event::create(kGpu);
  ready.record(producer);
  consumer.wait(ready);  // the GPU waits; the host does not
  Tensor y;
  {
    StreamGuard g(consumer);
    y = ops::clone(x);
  }
  // Reading y goes through this thread's current stream (the default one here), which knows nothing
  // of the consumer: wait for the consumer on the host first.
  consumer.synchronize();
  std::vector<double> v = y.to_vector();
  size_t wrong = 0;
  for (double e : v) wrong += e != 20.0;
  REQUIRE(wrong == 0);
  REQUIRE(ready.query());
  // Keep x alive until every stream that used it is done (the caller's business, see the allocator).
  device_synchronize(kGpu);
}

TEST_CASE("gpu events: timing and queries", "[gpu][stream]") {
  Stream s = Stream::create(kGpu);
  Event start = Event::create(kGpu, /*timing=*/true), stop = Event::create(kGpu, /*timing=*/true);
  start.record(s);
  {
    StreamGuard g(s);
    Tensor x = empty({1 << 22}, DType::f32, kGpu);
    ops::fill_(x, 1.0);
  }
  stop.record(s);
  stop.synchronize();
  REQUIRE(stop.query());
  REQUIRE(start.elapsed_ms(stop) >= 0.0);
  Event untimed = Event::create(kGpu);
  untimed.record(s);
  REQUIRE_THROWS_WITH(untimed.elapsed_ms(stop), Catch::Contains("timing = true"));
  REQUIRE_THROWS_WITH(Event().record(s), Catch::Contains("undefined"));
}

// ---- copies ---------------------------------------------------------------------------------------

TEST_CASE("gpu copy: host -> device -> host round trip is exact for every dtype", "[gpu][copy]") {
  for (DType dtype : kAllDTypes) {
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(17), int64_t(1000003)}) {
      INFO(dtype_name(dtype) << " x " << n);
      Tensor host = host_tensor(conversion_values(DType::f64, dtype, n, 11), {n}, dtype);
      Tensor gpu = host.to(kGpu);
      REQUIRE(gpu.device() == kGpu);
      REQUIRE(gpu.is_contiguous());
      require_same_bits(gpu.to(kCpu), host);
    }
  }
}

TEST_CASE("gpu copy: several staging chunks, sizes not a multiple of them", "[gpu][copy]") {
  const int64_t n = 5 * (1 << 20) + 3;  // 20 MiB of f32: five 4 MiB chunks and a tail
  Generator gen(3);
  Tensor host = randn({n}, DType::f32, kCpu, &gen);
  Tensor gpu = host.to(kGpu);
  require_same_bits(gpu.to(kCpu), host);
  // Two copies in a row reuse the staging buffers while the first may still be in flight.
  Tensor again = randn({n}, DType::f32, kCpu, &gen);
  Tensor gpu2 = again.to(kGpu);
  require_same_bits(gpu2.to(kCpu), again);
  require_same_bits(gpu.to(kCpu), host);
}

TEST_CASE("gpu copy: non-contiguous and broadcast sources cross devices", "[gpu][copy]") {
  for (DType dtype : kAllDTypes) {
    INFO(dtype_name(dtype));
    Tensor base = host_tensor(conversion_values(DType::f64, dtype, 37 * 38, 5), {37, 38}, dtype);
    // Host views -> GPU.
    for (const Tensor& view : {base.transpose(0, 1), strided_view(base), base.slice(0, 3, 30, 3), base.select(1, 7)}) {
      require_same_bits(view.to(kGpu).to(kCpu), ops::contiguous(view));
    }
    // GPU views -> host.
    Tensor on_gpu = base.to(kGpu);
    require_same_bits(on_gpu.transpose(0, 1).to(kCpu), ops::contiguous(base.transpose(0, 1)));
    require_same_bits(strided_view(on_gpu).to(kCpu), ops::contiguous(strided_view(base)));
    // A broadcast host source into a strided GPU destination, and the reverse.
    Tensor row = base.select(0, 4);                          // [38]
    Tensor want = empty({5, 38}, dtype);
    ops::copy_(want, row);
    Tensor dst_buffer = zeros({5, 76}, dtype, kGpu);
    ops::copy_(strided_view(dst_buffer), row);
    require_same_bits(strided_view(dst_buffer), want);
    Tensor host_dst = zeros({5, 76}, dtype);
    ops::copy_(strided_view(host_dst), row.to(kGpu).unsqueeze(0).expand({5, 38}));
    require_same_bits(strided_view(host_dst), want);
  }
}

TEST_CASE("gpu copy: every dtype pair, strided and broadcast, bit for bit as the CPU", "[gpu][copy]") {
  for (DType src : kAllDTypes) {
    for (DType dst : kAllDTypes) {
      INFO(dtype_name(src) << " -> " << dtype_name(dst));
      Tensor host_src = host_tensor(conversion_values(src, dst, 41 * 23, 7), {23, 41}, src).transpose(0, 1);  // [41, 23]
      Tensor gpu_src = ops::contiguous(host_src.transpose(0, 1)).to(kGpu).transpose(0, 1);                // same geometry

      // Same device, strided destination, transposed source.
      Tensor host_dst = zeros({41, 46}, dst), gpu_dst = zeros({41, 46}, dst, kGpu);
      ops::copy_(strided_view(host_dst), host_src);
      ops::copy_(strided_view(gpu_dst), gpu_src);
      require_same_bits(gpu_dst, host_dst);  // the untouched odd columns included

      // Broadcast: one row of the source to every row of the destination.
      Tensor host_b = empty({7, 23}, dst), gpu_b = empty({7, 23}, dst, kGpu);
      ops::copy_(host_b, host_src.select(0, 3));
      ops::copy_(gpu_b, gpu_src.select(0, 3));
      require_same_bits(gpu_b, host_b);

      // Across devices with a conversion: CPU source into a GPU destination.
      Tensor across = empty({41, 23}, dst, kGpu);
      ops::copy_(across, host_src);
      Tensor reference = empty({41, 23}, dst);
      ops::copy_(reference, host_src);
      require_same_bits(across, reference);

      // to_dtype on the GPU.
      require_same_bits(ops::to_dtype(gpu_src, dst), ops::to_dtype(host_src, dst));
    }
  }
}

TEST_CASE("gpu fill: every dtype, strided destinations", "[gpu][copy]") {
  for (DType dtype : kAllDTypes) {
    const std::vector<double> values = is_floating(dtype)
                                           ? std::vector<double>{0.0, -0.0, 1.5, 1e10, -3.25e-6, std::nan(""), INFINITY}
                                           : std::vector<double>{0.0, -1.0, 3.7, -12345.9, 2147483647.0};
    for (double value : values) {
      INFO(dtype_name(dtype) << " <- " << value);
      Tensor host = zeros({9, 34}, dtype), gpu = zeros({9, 34}, dtype, kGpu);
      ops::fill_(strided_view(host), value);
      ops::fill_(strided_view(gpu), value);
      require_same_bits(gpu, host);
      ops::fill_(host, value);  // contiguous: the memset path when all bytes are equal
      ops::fill_(gpu, value);
      require_same_bits(gpu, host);
    }
  }
}

TEST_CASE("gpu copy: overlapping source and destination, versions", "[gpu][copy]") {
  Tensor host = arange(0, 100, 1, DType::f32);
  Tensor gpu = host.to(kGpu);
  ops::copy_(host.slice(0, 1, 100), host.slice(0, 0, 99));  // shift right by one
  const uint64_t version = gpu.storage().version();
  ops::copy_(gpu.slice(0, 1, 100), gpu.slice(0, 0, 99));
  REQUIRE(gpu.storage().version() > version);
  require_same_bits(gpu, host);
  const uint64_t before_fill = gpu.storage().version();
  ops::fill_(gpu, 2);
  REQUIRE(gpu.storage().version() > before_fill);
  const uint64_t before_upload = gpu.storage().version();
  ops::copy_(gpu, host);  // across devices
  REQUIRE(gpu.storage().version() > before_upload);
}

TEST_CASE("gpu copy: values of GPU tensors read through the host", "[gpu][copy]") {
  Tensor t = tensor({{1, 2, 3}, {4, 5, 6}}, DType::bf16).to(kGpu);
  REQUIRE(t.to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6});
  REQUIRE(t.transpose(0, 1).to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
  REQUIRE(t.at({1, 2}) == 6);
  REQUIRE(t.select(0, 1).select(0, 0).item() == 4);
  REQUIRE(t.str().find("device=cuda:0") != std::string::npos);
  REQUIRE(t.str().find("[4, 5, 6]") != std::string::npos);
}

TEST_CASE("gpu copy: between two GPUs", "[gpu][copy]") {
  if (cuda_device_count() < 2) {
    SUCCEED("one GPU: nothing to copy between");
    return;
  }
  const Device other = Device::cuda(1);
  Generator gen(9);
  Tensor host = randn({1000, 33}, DType::f32, kCpu, &gen);
  Tensor on0 = host.to(kGpu);
  Tensor on1 = on0.to(other);
  REQUIRE(on1.device() == other);
  require_same_bits(on1.to(kCpu), host);
  require_same_bits(on0.transpose(0, 1).to(other).to(kCpu), ops::contiguous(host.transpose(0, 1)));
  Tensor converted = empty({1000, 33}, DType::bf16, other);
  ops::copy_(converted, on0);
  require_same_bits(converted, ops::to_dtype(host, DType::bf16));
}

TEST_CASE("gpu copy: 64-bit indexing beyond 2^31 elements", "[gpu][copy][large]") {
  const int64_t n = (int64_t(1) << 32) + 6;  // bf16: 8 GiB; the strided view reaches past 2^31
  if (free_gpu_bytes() < (int64_t(24) << 30)) {
    SUCCEED("less than 24 GiB free: skipped");
    return;
  }
  Tensor big = empty({n}, DType::bf16, kGpu);
  ops::fill_(big, 0.0);
  Tensor even = big.slice(0, 0, n, 2);  // 2^31 + 3 elements, offsets up to 2^32 + 4
  ops::fill_(even, 1.5);
  for (int64_t i : {int64_t(0), int64_t(1), int64_t(1) << 31, (int64_t(1) << 32) + 4, (int64_t(1) << 32) + 5})
    REQUIRE(big.at({i}) == (i % 2 == 0 ? 1.5 : 0.0));
  Tensor wide = empty({even.size(0)}, DType::f32, kGpu);  // 8 GiB
  ops::copy_(wide, even);
  for (int64_t i : {int64_t(0), int64_t(1) << 30, even.size(0) - 1}) REQUIRE(wide.at({i}) == 1.5);
}

// ---- random numbers -------------------------------------------------------------------------------

TEST_CASE("gpu rng: randn and uniform give the CPU's bits", "[gpu][rng]") {
  for (DType dtype : kFloatDTypes) {
    for (int64_t n : {int64_t(1), int64_t(1000), int64_t(1000003)}) {
      INFO(dtype_name(dtype) << " x " << n);
      Generator cpu_gen(1234), gpu_gen(1234);
      cpu_gen.advance(77);
      gpu_gen.advance(77);
      require_same_bits(randn({n}, dtype, kGpu, &gpu_gen), randn({n}, dtype, kCpu, &cpu_gen));
      require_same_bits(uniform({n}, -3, 5, dtype, kGpu, &gpu_gen), uniform({n}, -3, 5, dtype, kCpu, &cpu_gen));
      // Narrow types round many values of [0, 1) up to 1: both step them back below.
      Tensor u = uniform({n}, 0, 1, dtype, kGpu, &gpu_gen);
      require_same_bits(u, uniform({n}, 0, 1, dtype, kCpu, &cpu_gen));
      for (double v : u.to_vector()) REQUIRE(v < 1.0);
      REQUIRE(gpu_gen.offset == cpu_gen.offset);
    }
  }
  // Shapes and the default generator.
  manual_seed(5);
  Tensor a = randn({3, 5, 7}, DType::f32, kGpu);
  manual_seed(5);
  require_same_bits(a, randn({3, 5, 7}, DType::f32, kCpu));
  REQUIRE_THROWS_WITH(randn({2}, DType::i32, kGpu), Catch::Contains("randn: dtype must be floating point"));
}

// ---- autograd across devices ----------------------------------------------------------------------

TEST_CASE("gpu to(Device): gradients flow back to the original device", "[gpu][autograd]") {
  Tensor x = tensor({1.0, -2.0, 3.5}, DType::f32);
  x.requires_grad_(true);
  Tensor c = tensor({2.0, 3.0, 4.0}, DType::f32);
  Tape tape;
  Tensor loss;
  {
    TapeGuard guard(tape);
    Tensor on_gpu = x.to(kGpu);  // recorded
    REQUIRE(on_gpu.requires_grad());
    loss = sum(on_gpu.to(kCpu) * c);  // computed on the CPU
  }
  tape.backward(loss);
  REQUIRE(x.grad().device() == kCpu);
  REQUIRE(x.grad().to_vector() == std::vector<double>{2, 3, 4});

  // A GPU leaf: its gradient arrives on the GPU.
  Tensor leaf = tensor({1.0, 2.0}, DType::f32).to(kGpu);
  leaf.requires_grad_(true);
  Tape tape2;
  Tensor loss2;
  {
    TapeGuard guard(tape2);
    Tensor h = leaf.to(kCpu);
    loss2 = sum(h * h);
  }
  tape2.backward(loss2);
  REQUIRE(leaf.grad().device() == kGpu);
  REQUIRE(leaf.grad().to_vector() == std::vector<double>{2, 4});

  // Integers carry no gradient; the copy is still made.
  Tensor idx = arange(5).to(kGpu);
  REQUIRE(idx.dtype() == DType::i64);
  REQUIRE(!idx.requires_grad());
}

#endif  // BRIGADE_HAVE_CUDA
