// Convolutions, forward and both backward passes, on ResNet-style layers:
//  - a GPU: the hand-written direct kernel against cuDNN (in a build without cuDNN only the direct
//    kernel is measured, with no baseline);
//  - the CPU: its direct loops over kernel taps (kernels/cpu/conv.cpp) against the FMA peak.
#include "bench_kernels/benchmarks.h"
#include "core/rng.h"
#include "kernels/ops.h"
#if BRIGADE_HAVE_CUDNN
#include "kernels/cuda/conv_cudnn.h"
#endif

namespace brigade::bench {
namespace {

// Restores the process-wide conv backend when a measurement is done.
class ConvBackendScope {
 public:
  explicit ConvBackendScope(ops::ConvBackend backend) : previous_(ops::conv_backend()) {
    ops::set_conv_backend(backend);
  }
  ~ConvBackendScope() { ops::set_conv_backend(previous_); }

 private:
  ops::ConvBackend previous_;
};

void conv_layer(Session& s, const ConvLayer& l, DType t) {
  const Device dev = s.device();
  const ops::Conv2dParams p{l.stride, l.padding};
  const Tensor x = randn({l.n, l.c, l.h, l.w}, t, dev), w = randn({l.o, l.c, l.kernel, l.kernel}, t, dev);
  const Tensor y = ops::conv2d(x, w, Tensor(), p);
  const Tensor gy = randn(y.shape(), t, dev);
  const double flops = 2.0 * double(y.numel()) * double(l.c * l.kernel * l.kernel);
  const std::string shape = dims_text({l.n, l.c, l.h, l.w}) + " k" + std::to_string(l.kernel) + " s" +
                            std::to_string(l.stride) + " -> " + std::to_string(l.o);

  struct Pass {
    const char* name;
    std::function<void()> run;
  };
  const Pass passes[] = {
      {"forward", [&] { ops::conv2d(x, w, Tensor(), p); }},
      {"backward input", [&] { ops::conv2d_backward_input(gy, w, x.shape(), p); }},
      {"backward weight", [&] { ops::conv2d_backward_weight(gy, x, w.shape(), p); }},
  };
  for (const Pass& pass : passes) {
    if (dev.is_cpu()) {
      s.throughput({"conv", std::string("conv2d ") + pass.name, shape, dtype_name(t)}, flops, pass.run, "FMA peak",
                   s.fma_peak());
      continue;
    }
    double cudnn = 0;
#if BRIGADE_HAVE_CUDNN
    {
      ConvBackendScope scope(ops::ConvBackend::cudnn);
      // One trial call: when cuDNN has no acceptable algorithm for this layer, the call runs the
      // direct kernel, and timing it as "cuDNN" would make the direct row read ~100% of itself.
      const int64_t before = cuda::cudnn_conv_fallbacks();
      pass.run();
      const Label label{"conv", std::string("conv2d cudnn ") + pass.name, shape, dtype_name(t)};
      if (cuda::cudnn_conv_fallbacks() != before)
        s.record_failure(label, "cuDNN offers no acceptable algorithm for this layer (it would run the direct kernel)");
      else
        cudnn = s.throughput(label, flops, pass.run, "", 0);
    }
#endif
    ConvBackendScope scope(ops::ConvBackend::direct);
    s.throughput({"conv", std::string("conv2d direct ") + pass.name, shape, dtype_name(t)}, flops, pass.run, "cuDNN",
                 cudnn);
  }
}

}  // namespace

void run_conv_benchmarks(Session& s, const Sizes& sizes) {
  for (DType t : sizes.conv_dtypes)
    for (const ConvLayer& l : sizes.conv_layers) conv_layer(s, l, t);
}

}  // namespace brigade::bench
