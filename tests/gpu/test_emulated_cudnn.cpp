// The emulated cuDNN (emulator/cudnn_*.cpp), checked against cuDNN's documented semantics:
// hand-computed convolutions, an independent f64 reference written here (it scatters where the
// emulation gathers), finite differences of the forward pass, descriptor strides, alpha/beta, 16-bit
// data, the status of every bad parameter the emulation checks, faults reported at the next
// synchronisation, the heuristics' rankings — and brigade's own call site (kernels/cuda/conv_cudnn.cpp)
// running on the emulation against brigade's CPU convolution.
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/cuda/conv_cudnn.h"
#include "kernels/ops.h"

using Catch::Contains;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- RAII wrappers --------------------------------------------------------------------------------

struct Handle {
  cudnnHandle_t h = nullptr;
  Handle() { REQUIRE(cudnnCreate(&h) == CUDNN_STATUS_SUCCESS); }
  ~Handle() { cudnnDestroy(h); }
};
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() { REQUIRE(cudnnCreateTensorDescriptor(&d) == CUDNN_STATUS_SUCCESS); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d); }
};
struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc() { REQUIRE(cudnnCreateFilterDescriptor(&d) == CUDNN_STATUS_SUCCESS); }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d); }
};
struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc() { REQUIRE(cudnnCreateConvolutionDescriptor(&d) == CUDNN_STATUS_SUCCESS); }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d); }
};

// Device memory of `bytes`, freed at scope exit.
struct DeviceBytes {
  void* p = nullptr;
  explicit DeviceBytes(size_t bytes) {
    if (bytes) REQUIRE(cudaMalloc(&p, bytes) == cudaSuccess);
  }
  ~DeviceBytes() { cudaFree(p); }
};

// ---- element types --------------------------------------------------------------------------------

template <class T> T from_double(double v);
template <> float from_double<float>(double v) { return float(v); }
template <> double from_double<double>(double v) { return v; }
template <> __half from_double<__half>(double v) { return __float2half_rn(float(v)); }
template <> __nv_bfloat16 from_double<__nv_bfloat16>(double v) { return __float2bfloat16_rn(float(v)); }
double to_double(float v) { return v; }
double to_double(double v) { return v; }
double to_double(__half v) { return __half2float(v); }
double to_double(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T> cudnnDataType_t type_of();
template <> cudnnDataType_t type_of<float>() { return CUDNN_DATA_FLOAT; }
template <> cudnnDataType_t type_of<double>() { return CUDNN_DATA_DOUBLE; }
template <> cudnnDataType_t type_of<__half>() { return CUDNN_DATA_HALF; }
template <> cudnnDataType_t type_of<__nv_bfloat16>() { return CUDNN_DATA_BFLOAT16; }

// Values as T holds them (rounded), so the reference sees exactly what the emulation reads.
template <class T>
std::vector<double> representable(std::vector<double> v) {
  for (double& e : v) e = to_double(from_double<T>(e));
  return v;
}

std::vector<double> random_values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> v(n);
  for (double& e : v) e = dist(gen);
  return v;
}

// ---- the convolution and its f64 reference ---------------------------------------------------------

struct Geometry {
  int n, c, h, w, k, r, s;
  int pad[2] = {0, 0}, stride[2] = {1, 1}, dilation[2] = {1, 1};
  int groups = 1;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  int out(int d) const {
    const int in = d == 0 ? h : w, f = d == 0 ? r : s;
    return 1 + (in + 2 * pad[d] - ((f - 1) * dilation[d] + 1)) / stride[d];
  }
  size_t x_size() const { return size_t(n) * c * h * w; }
  size_t w_size() const { return size_t(k) * (c / groups) * r * s; }
  size_t y_size() const { return size_t(n) * k * out(0) * out(1); }
};

// Packed NCHW / KCRS indices.
size_t at(int a, int b, int c, int d, int B, int C, int D) { return ((size_t(a) * B + b) * C + c) * D + d; }

// Visits every (output element, filter tap, input element) triple the convolution multiplies, so the
// three references below share one definition of "which x meets which w for which y".
template <class Visit>
void each_product(const Geometry& g, Visit&& visit) {
  const int cg = g.c / g.groups, kg = g.k / g.groups, oh_n = g.out(0), ow_n = g.out(1);
  for (int n = 0; n < g.n; ++n)
    for (int k = 0; k < g.k; ++k)
      for (int oh = 0; oh < oh_n; ++oh)
        for (int ow = 0; ow < ow_n; ++ow)
          for (int c = 0; c < cg; ++c)
            for (int r = 0; r < g.r; ++r)
              for (int s = 0; s < g.s; ++s) {
                const int ih = oh * g.stride[0] - g.pad[0] + r * g.dilation[0];
                const int iw = ow * g.stride[1] - g.pad[1] + s * g.dilation[1];
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                const int fr = g.mode == CUDNN_CONVOLUTION ? g.r - 1 - r : r;
                const int fs = g.mode == CUDNN_CONVOLUTION ? g.s - 1 - s : s;
                visit(at(n, k, oh, ow, g.k, oh_n, ow_n), at(k, c, fr, fs, cg, g.r, g.s),
                      at(n, k / kg * cg + c, ih, iw, g.c, g.h, g.w));
              }
}

std::vector<double> reference_forward(const Geometry& g, const std::vector<double>& x, const std::vector<double>& w) {
  std::vector<double> y(g.y_size(), 0.0);
  each_product(g, [&](size_t yi, size_t wi, size_t xi) { y[yi] += x[xi] * w[wi]; });
  return y;
}
std::vector<double> reference_backward_data(const Geometry& g, const std::vector<double>& dy,
                                            const std::vector<double>& w) {
  std::vector<double> dx(g.x_size(), 0.0);
  each_product(g, [&](size_t yi, size_t wi, size_t xi) { dx[xi] += dy[yi] * w[wi]; });
  return dx;
}
std::vector<double> reference_backward_filter(const Geometry& g, const std::vector<double>& x,
                                              const std::vector<double>& dy) {
  std::vector<double> dw(g.w_size(), 0.0);
  each_product(g, [&](size_t yi, size_t wi, size_t xi) { dw[wi] += dy[yi] * x[xi]; });
  return dw;
}

// Descriptors of one convolution: packed NCHW tensors and a KCRS filter of element type `type`.
struct Setup {
  Handle handle;
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
  Setup(const Geometry& g, cudnnDataType_t type, cudnnDataType_t compute,
        cudnnMathType_t math = CUDNN_DEFAULT_MATH) {
    REQUIRE(cudnnSetTensor4dDescriptor(x.d, CUDNN_TENSOR_NCHW, type, g.n, g.c, g.h, g.w) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetFilter4dDescriptor(w.d, type, CUDNN_TENSOR_NCHW, g.k, g.c / g.groups, g.r, g.s) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetConvolution2dDescriptor(conv.d, g.pad[0], g.pad[1], g.stride[0], g.stride[1], g.dilation[0],
                                            g.dilation[1], g.mode, compute) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetConvolutionGroupCount(conv.d, g.groups) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetConvolutionMathType(conv.d, math) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetTensor4dDescriptor(y.d, CUDNN_TENSOR_NCHW, type, g.n, g.k, g.out(0), g.out(1)) ==
            CUDNN_STATUS_SUCCESS);
  }
};

// Device copies of host values as T (`count` elements of the buffer; NaN-filled past the values).
template <class T>
struct DeviceArray {
  DeviceBytes bytes;
  size_t count;
  explicit DeviceArray(const std::vector<double>& values) : bytes(values.size() * sizeof(T)), count(values.size()) {
    std::vector<T> host(values.size());
    for (size_t i = 0; i < values.size(); ++i) host[i] = from_double<T>(values[i]);
    REQUIRE(cudaMemcpy(bytes.p, host.data(), count * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  T* data() const { return static_cast<T*>(bytes.p); }
  std::vector<double> read() const {  // synchronises with the legacy default stream, where Setup's handle runs
    std::vector<T> host(count);
    REQUIRE(cudaMemcpy(host.data(), bytes.p, count * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    std::vector<double> out(count);
    for (size_t i = 0; i < count; ++i) out[i] = to_double(host[i]);
    return out;
  }
};

// alpha or beta as the call wants it: double for double data, float otherwise.
struct Scale {
  float f;
  double d;
  explicit Scale(double v) : f(float(v)), d(v) {}
  const void* for_type(cudnnDataType_t t) const { return t == CUDNN_DATA_DOUBLE ? static_cast<const void*>(&d) : &f; }
};

template <class Query, class Algo>
size_t workspace_for(Query&& query, Algo algo) {
  size_t bytes = 0;
  REQUIRE(query(algo, &bytes) == CUDNN_STATUS_SUCCESS);
  return bytes;
}

// Runs one direction with `algo` on device copies of the inputs; returns the output (which starts as
// `out_init`) after alpha * op + beta * out.
template <class T>
std::vector<double> run_forward(Setup& s, const std::vector<double>& x, const std::vector<double>& w,
                                std::vector<double> y, cudnnConvolutionFwdAlgo_t algo, double alpha = 1,
                                double beta = 0) {
  DeviceArray<T> dx(x), dw(w), dy(y);
  const size_t ws = workspace_for(
      [&](auto a, size_t* b) { return cudnnGetConvolutionForwardWorkspaceSize(s.handle.h, s.x.d, s.w.d, s.conv.d, s.y.d, a, b); },
      algo);
  DeviceBytes workspace(ws);
  const Scale a(alpha), b(beta);
  REQUIRE(cudnnConvolutionForward(s.handle.h, a.for_type(type_of<T>()), s.x.d, dx.data(), s.w.d, dw.data(), s.conv.d,
                                  algo, workspace.p, ws, b.for_type(type_of<T>()), s.y.d,
                                  dy.data()) == CUDNN_STATUS_SUCCESS);
  return dy.read();
}

template <class T>
std::vector<double> run_backward_data(Setup& s, const std::vector<double>& w, const std::vector<double>& dy,
                                      std::vector<double> dx, cudnnConvolutionBwdDataAlgo_t algo, double alpha = 1,
                                      double beta = 0) {
  DeviceArray<T> d_w(w), d_dy(dy), d_dx(dx);
  const size_t ws = workspace_for(
      [&](auto a, size_t* b) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(s.handle.h, s.w.d, s.y.d, s.conv.d, s.x.d, a, b);
      },
      algo);
  DeviceBytes workspace(ws);
  const Scale a(alpha), b(beta);
  REQUIRE(cudnnConvolutionBackwardData(s.handle.h, a.for_type(type_of<T>()), s.w.d, d_w.data(), s.y.d, d_dy.data(),
                                       s.conv.d, algo, workspace.p, ws, b.for_type(type_of<T>()), s.x.d,
                                       d_dx.data()) == CUDNN_STATUS_SUCCESS);
  return d_dx.read();
}

template <class T>
std::vector<double> run_backward_filter(Setup& s, const std::vector<double>& x, const std::vector<double>& dy,
                                        std::vector<double> dw, cudnnConvolutionBwdFilterAlgo_t algo, double alpha = 1,
                                        double beta = 0) {
  DeviceArray<T> d_x(x), d_dy(dy), d_dw(dw);
  const size_t ws = workspace_for(
      [&](auto a, size_t* b) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(s.handle.h, s.x.d, s.y.d, s.conv.d, s.w.d, a, b);
      },
      algo);
  DeviceBytes workspace(ws);
  const Scale a(alpha), b(beta);
  REQUIRE(cudnnConvolutionBackwardFilter(s.handle.h, a.for_type(type_of<T>()), s.x.d, d_x.data(), s.y.d, d_dy.data(),
                                         s.conv.d, algo, workspace.p, ws, b.for_type(type_of<T>()), s.w.d,
                                         d_dw.data()) == CUDNN_STATUS_SUCCESS);
  return d_dw.read();
}

// |got - want| <= relative * |want| + absolute, element by element.
void require_close(const std::vector<double>& got, const std::vector<double>& want, double relative,
                   double absolute = 1e-6) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= relative * std::abs(want[i]) + absolute);
  }
}

const cudnnConvolutionFwdAlgo_t kForwardAlgos[] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_GEMM};

// What the next synchronisation reports about earlier work. The runtime returns a fault from the
// synchronising call itself; builds of the emulator from before that change returned it from the
// following cudaGetLastError instead, so both are collected.
cudaError_t synchronise() {
  const cudaError_t synced = cudaDeviceSynchronize();
  const cudaError_t last = cudaGetLastError();
  return synced != cudaSuccess ? synced : last;
}

std::string last_cudnn_error() {
  char text[1024];
  cudnnGetLastErrorString(text, sizeof text);
  return text;
}

}  // namespace

// ---- descriptors and queries -------------------------------------------------------------------------

TEST_CASE("emulated cuDNN: version, status strings and the output-dim query", "[emulated_cudnn]") {
  CHECK(cudnnGetVersion() == size_t(CUDNN_VERSION));
  CHECK(std::string(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM)) == "CUDNN_STATUS_BAD_PARAM");
  CHECK(std::string(cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)) == "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT");

  // x [2,3,7,9], w [4,3,3,2], pad (1,0), stride (2,3), dilation (1,2):
  // h = 1 + (7 + 2 - 3) / 2 = 4; the dilated filter is 3 wide, w = 1 + (9 - 3) / 3 = 3.
  TensorDesc x;
  FilterDesc w;
  ConvDesc conv;
  int n = 0, c = 0, h = 0, wd = 0;
  CHECK(cudnnGetConvolution2dForwardOutputDim(conv.d, x.d, w.d, &n, &c, &h, &wd) == CUDNN_STATUS_BAD_PARAM);  // unset
  REQUIRE(cudnnSetTensor4dDescriptor(x.d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 3, 7, 9) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetFilter4dDescriptor(w.d, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 3, 3, 2) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetConvolution2dDescriptor(conv.d, 1, 0, 2, 3, 1, 2, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnGetConvolution2dForwardOutputDim(conv.d, x.d, w.d, &n, &c, &h, &wd) == CUDNN_STATUS_SUCCESS);
  CHECK((n == 2 && c == 4 && h == 4 && wd == 3));
  CHECK(cudnnGetConvolution2dForwardOutputDim(conv.d, x.d, w.d, nullptr, &c, &h, &wd) ==
        CUDNN_STATUS_BAD_PARAM_NULL_POINTER);

  // The filter's input channels times the group count must be x's channels.
  REQUIRE(cudnnSetConvolutionGroupCount(conv.d, 3) == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnGetConvolution2dForwardOutputDim(conv.d, x.d, w.d, &n, &c, &h, &wd) == CUDNN_STATUS_BAD_PARAM);
  REQUIRE(cudnnSetFilter4dDescriptor(w.d, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 6, 1, 3, 2) == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnGetConvolution2dForwardOutputDim(conv.d, x.d, w.d, &n, &c, &h, &wd) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetConvolutionGroupCount(conv.d, 1) == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnGetConvolution2dForwardOutputDim(conv.d, x.d, w.d, &n, &c, &h, &wd) == CUDNN_STATUS_BAD_PARAM);

  // A dilated filter larger than the padded input has no output.
  REQUIRE(cudnnSetFilter4dDescriptor(w.d, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 3, 10, 2) == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnGetConvolution2dForwardOutputDim(conv.d, x.d, w.d, &n, &c, &h, &wd) == CUDNN_STATUS_BAD_PARAM);
  CHECK_THAT(last_cudnn_error(), Contains("larger than input"));

  // Round trips.
  cudnnDataType_t type;
  int st[4];
  REQUIRE(cudnnGetTensor4dDescriptor(x.d, &type, &n, &c, &h, &wd, &st[0], &st[1], &st[2], &st[3]) ==
          CUDNN_STATUS_SUCCESS);
  CHECK((type == CUDNN_DATA_FLOAT && st[0] == 189 && st[1] == 63 && st[2] == 9 && st[3] == 1));
  REQUIRE(cudnnSetTensor4dDescriptor(x.d, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, 2, 3, 7, 9) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnGetTensor4dDescriptor(x.d, &type, &n, &c, &h, &wd, &st[0], &st[1], &st[2], &st[3]) ==
          CUDNN_STATUS_SUCCESS);
  CHECK((type == CUDNN_DATA_HALF && st[0] == 189 && st[1] == 1 && st[2] == 27 && st[3] == 3));
  int ph, pw, u, v, dh, dw;
  cudnnConvolutionMode_t mode;
  REQUIRE(cudnnGetConvolution2dDescriptor(conv.d, &ph, &pw, &u, &v, &dh, &dw, &mode, &type) == CUDNN_STATUS_SUCCESS);
  CHECK((ph == 1 && pw == 0 && u == 2 && v == 3 && dh == 1 && dw == 2 && mode == CUDNN_CROSS_CORRELATION));
  cudnnMathType_t math;
  REQUIRE(cudnnGetConvolutionMathType(conv.d, &math) == CUDNN_STATUS_SUCCESS);
  CHECK(math == CUDNN_DEFAULT_MATH);  // a new descriptor's
}

// ---- the forward pass, by hand -----------------------------------------------------------------------

TEST_CASE("emulated cuDNN: a padded, strided convolution computed by hand, in both modes", "[emulated_cudnn]") {
  // x = [[1,2,3],[4,5,6],[7,8,9]] padded by 1 is 5x5; a 2x2 window at stride 2 sees, at its four
  // positions, [0,0;0,1], [0,0;2,3], [0,4;0,7], [5,6;8,9].
  Geometry g{1, 1, 3, 3, 1, 2, 2};
  g.pad[0] = g.pad[1] = 1;
  g.stride[0] = g.stride[1] = 2;
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w = {1, 2, 3, 4};
  for (cudnnConvolutionFwdAlgo_t algo : kForwardAlgos) {
    INFO("algo " << int(algo));
    Setup cross(g, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
    // w applied as stored: 4*1 = 4; 3*2 + 4*3 = 18; 2*4 + 4*7 = 36; 5 + 12 + 24 + 36 = 77.
    CHECK(run_forward<float>(cross, x, w, std::vector<double>(4, kNaN), algo) == std::vector<double>{4, 18, 36, 77});
    // CUDNN_CONVOLUTION flips w to [4,3;2,1]: 1; 2*2 + 3 = 7; 3*4 + 7 = 19; 20 + 18 + 16 + 9 = 63.
    g.mode = CUDNN_CONVOLUTION;
    Setup flipped(g, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
    g.mode = CUDNN_CROSS_CORRELATION;
    CHECK(run_forward<float>(flipped, x, w, std::vector<double>(4, kNaN), algo) == std::vector<double>{1, 7, 19, 63});
  }
}

TEST_CASE("emulated cuDNN: a dilated convolution computed by hand", "[emulated_cudnn]") {
  // x[i][j] = 4i + j (4x4), w = [1,2;3,4] dilated by 2 covers 3x3: y(oh,ow) = x[oh][ow] + 2 x[oh][ow+2]
  // + 3 x[oh+2][ow] + 4 x[oh+2][ow+2]; y(0,0) = 0 + 4 + 24 + 40 = 68, and each step right adds the
  // weights' sum 10, each step down 4 * 10.
  Geometry g{1, 1, 4, 4, 1, 2, 2};
  g.dilation[0] = g.dilation[1] = 2;
  std::vector<double> x(16);
  for (int i = 0; i < 16; ++i) x[i] = i;
  Setup s(g, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
  for (cudnnConvolutionFwdAlgo_t algo : kForwardAlgos)
    CHECK(run_forward<float>(s, x, {1, 2, 3, 4}, std::vector<double>(4, kNaN), algo) ==
          std::vector<double>{68, 78, 108, 118});
}

// ---- descriptor strides, alpha and beta -----------------------------------------------------------------

TEST_CASE("emulated cuDNN: padded strides are honoured and padding is never read or written", "[emulated_cudnn]") {
  // x [2,2,3,3] with a padding column per row, a padding row per channel and padding per image:
  // strides (40, 16, 4, 1). y [2,3,2,2] with strides (30, 8, 3, 1). Padding holds NaN in inputs and a
  // sentinel in outputs; the stated elements must come out as the packed reference.
  Geometry g{2, 2, 3, 3, 3, 2, 2};
  const int xs[4] = {40, 16, 4, 1}, ys[4] = {30, 8, 3, 1};
  const double sentinel = 1234.5;
  const std::vector<double> x = random_values(g.x_size(), 1), w = random_values(g.w_size(), 2),
                            dy = random_values(g.y_size(), 3);
  auto spread = [](const std::vector<double>& packed, const int* dims, const int* strides, double fill) {
    std::vector<double> out(size_t(dims[0]) * strides[0], fill);
    size_t i = 0;
    for (int a = 0; a < dims[0]; ++a)
      for (int b = 0; b < dims[1]; ++b)
        for (int c = 0; c < dims[2]; ++c)
          for (int d = 0; d < dims[3]; ++d) out[a * strides[0] + b * strides[1] + c * strides[2] + d * strides[3]] = packed[i++];
    return out;
  };
  const int xd[4] = {2, 2, 3, 3}, yd[4] = {2, 3, 2, 2};
  Setup s(g, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
  REQUIRE(cudnnSetTensor4dDescriptorEx(s.x.d, CUDNN_DATA_FLOAT, 2, 2, 3, 3, xs[0], xs[1], xs[2], xs[3]) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetTensor4dDescriptorEx(s.y.d, CUDNN_DATA_FLOAT, 2, 3, 2, 2, ys[0], ys[1], ys[2], ys[3]) ==
          CUDNN_STATUS_SUCCESS);

  // Outputs start NaN at the stated elements (beta = 0 must not read them) and `sentinel` elsewhere.
  const std::vector<double> y_start = spread(std::vector<double>(g.y_size(), kNaN), yd, ys, sentinel);
  const std::vector<double> dx_start = spread(std::vector<double>(g.x_size(), kNaN), xd, xs, sentinel);
  for (cudnnConvolutionFwdAlgo_t algo : {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_GEMM}) {
    const std::vector<double> got = run_forward<float>(s, spread(x, xd, xs, kNaN), w, y_start, algo);
    require_close(got, spread(reference_forward(g, representable<float>(x), representable<float>(w)), yd, ys, sentinel),
                  1e-5);
  }
  for (cudnnConvolutionBwdDataAlgo_t algo : {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1}) {
    const std::vector<double> got = run_backward_data<float>(s, w, spread(dy, yd, ys, kNaN), dx_start, algo);
    require_close(got, spread(reference_backward_data(g, representable<float>(dy), representable<float>(w)), xd, xs,
                              sentinel),
                  1e-5);
  }
  for (cudnnConvolutionBwdFilterAlgo_t algo : {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3}) {
    const std::vector<double> got = run_backward_filter<float>(s, spread(x, xd, xs, kNaN), spread(dy, yd, ys, kNaN),
                                                               std::vector<double>(g.w_size(), kNaN), algo);
    require_close(got, reference_backward_filter(g, representable<float>(x), representable<float>(dy)), 1e-5);
  }
}

TEST_CASE("emulated cuDNN: out = alpha * op + beta * out; beta = 0 never reads out", "[emulated_cudnn]") {
  Geometry g{1, 2, 4, 4, 2, 3, 3};
  g.pad[0] = g.pad[1] = 1;
  const std::vector<double> x = random_values(g.x_size(), 4), w = random_values(g.w_size(), 5),
                            y0 = random_values(g.y_size(), 6);
  const std::vector<double> conv = reference_forward(g, representable<float>(x), representable<float>(w));
  Setup s(g, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
  const auto algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  require_close(run_forward<float>(s, x, w, std::vector<double>(g.y_size(), kNaN), algo, 1, 0), conv, 1e-5);
  std::vector<double> want(g.y_size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = 2 * conv[i] + float(y0[i]);
  require_close(run_forward<float>(s, x, w, y0, algo, 2, 1), want, 1e-5);
  // Double data takes double scales: 0.1 is not a float, so reading it as one would show.
  Setup d(g, CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE);
  const std::vector<double> exact = reference_forward(g, x, w);
  for (size_t i = 0; i < want.size(); ++i) want[i] = 0.1 * exact[i] - 0.3 * y0[i];
  require_close(run_forward<double>(d, x, w, y0, algo, 0.1, -0.3), want, 1e-13, 1e-15);
  // And the backward passes accumulate the same way.
  const std::vector<double> dw0 = random_values(g.w_size(), 7);
  const std::vector<double> dw = reference_backward_filter(g, x, y0);
  want.assign(dw.size(), 0);
  for (size_t i = 0; i < dw.size(); ++i) want[i] = dw[i] + dw0[i];
  require_close(run_backward_filter<double>(d, x, y0, dw0, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, 1, 1), want, 1e-13,
                1e-15);
}

// ---- the backward passes -----------------------------------------------------------------------------

TEMPLATE_TEST_CASE("emulated cuDNN: backward data and filter match the f64 reference", "[emulated_cudnn]", float,
                   double) {
  // Grouped, strided, padded and dilated, in both modes.
  Geometry g{2, 4, 7, 6, 6, 3, 2};
  g.pad[0] = 1, g.stride[0] = 2, g.dilation[1] = 2, g.groups = 2;
  const double tolerance = std::is_same_v<TestType, float> ? 1e-5 : 1e-13;
  for (cudnnConvolutionMode_t mode : {CUDNN_CROSS_CORRELATION, CUDNN_CONVOLUTION}) {
    g.mode = mode;
    INFO("mode " << int(mode));
    const std::vector<double> x = representable<TestType>(random_values(g.x_size(), 8)),
                              w = representable<TestType>(random_values(g.w_size(), 9)),
                              dy = representable<TestType>(random_values(g.y_size(), 10));
    const cudnnDataType_t type = type_of<TestType>();
    Setup s(g, type, type);
    for (cudnnConvolutionFwdAlgo_t algo : kForwardAlgos)
      require_close(run_forward<TestType>(s, x, w, std::vector<double>(g.y_size(), kNaN), algo),
                    reference_forward(g, x, w), tolerance, tolerance);
    for (cudnnConvolutionBwdDataAlgo_t algo : {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1})
      require_close(run_backward_data<TestType>(s, w, dy, std::vector<double>(g.x_size(), kNaN), algo),
                    reference_backward_data(g, dy, w), tolerance, tolerance);
    for (cudnnConvolutionBwdFilterAlgo_t algo : {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1})
      require_close(run_backward_filter<TestType>(s, x, dy, std::vector<double>(g.w_size(), kNaN), algo),
                    reference_backward_filter(g, x, dy), tolerance, tolerance);
    // ALGO_3 needs dilation 1 (the reference's support table).
    size_t bytes = 0;
    CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(s.handle.h, s.x.d, s.y.d, s.conv.d, s.w.d,
                                                         CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, &bytes) ==
          CUDNN_STATUS_NOT_SUPPORTED_SHAPE);
  }
  // Without dilation ALGO_3 runs.
  Geometry plain{2, 3, 5, 5, 2, 3, 3};
  plain.pad[0] = plain.pad[1] = 1, plain.stride[1] = 2;
  const std::vector<double> x = representable<TestType>(random_values(plain.x_size(), 11)),
                            dy = representable<TestType>(random_values(plain.y_size(), 12));
  Setup s(plain, type_of<TestType>(), type_of<TestType>());
  require_close(run_backward_filter<TestType>(s, x, dy, std::vector<double>(plain.w_size(), kNaN),
                                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3),
                reference_backward_filter(plain, x, dy), tolerance, tolerance);
}

TEST_CASE("emulated cuDNN: the backward passes are the forward pass's gradients (finite differences)",
          "[emulated_cudnn]") {
  // L(x, w) = sum(forward(x, w) * g) is linear in each of x and w, so a central difference with step
  // 0.5 is exact up to rounding; it must equal backward data (dy = g) and backward filter.
  Geometry geo{1, 2, 4, 4, 2, 2, 3};
  geo.pad[0] = geo.pad[1] = 1, geo.stride[0] = 2, geo.mode = CUDNN_CONVOLUTION;
  const std::vector<double> x = random_values(geo.x_size(), 13), w = random_values(geo.w_size(), 14),
                            g = random_values(geo.y_size(), 15);
  Setup s(geo, CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE);
  const auto algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& wv) {
    const std::vector<double> y = run_forward<double>(s, xv, wv, std::vector<double>(geo.y_size(), kNaN), algo);
    double sum = 0;
    for (size_t i = 0; i < y.size(); ++i) sum += y[i] * g[i];
    return sum;
  };
  // d loss / d v[i], where v is x (of_x) or w.
  auto difference = [&](bool of_x, size_t i) {
    std::vector<double> v = of_x ? x : w;
    const double h = 0.5;
    v[i] += h;
    const double up = of_x ? loss(v, w) : loss(x, v);
    v[i] -= 2 * h;
    const double down = of_x ? loss(v, w) : loss(x, v);
    return (up - down) / (2 * h);
  };
  const std::vector<double> dx =
      run_backward_data<double>(s, w, g, std::vector<double>(geo.x_size(), kNaN), CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
  const std::vector<double> dw = run_backward_filter<double>(s, x, g, std::vector<double>(geo.w_size(), kNaN),
                                                             CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
  for (size_t i = 0; i < x.size(); ++i) CHECK(std::abs(difference(true, i) - dx[i]) < 1e-12);
  for (size_t i = 0; i < w.size(); ++i) CHECK(std::abs(difference(false, i) - dw[i]) < 1e-12);
}

// ---- 16-bit data -------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("emulated cuDNN: half and bfloat16 data, f32 accumulation, one rounding", "[emulated_cudnn]",
                   __half, __nv_bfloat16) {
  // PSEUDO_HALF_CONFIG / PSEUDO_BFLOAT16_CONFIG: 16-bit tensors, f32 compute. The reference sums the
  // rounded inputs in f64; the result may differ from it by the final rounding (half an ulp) plus the
  // f32 sum's error.
  const double ulp = std::is_same_v<TestType, __half> ? 1.0 / 1024 : 1.0 / 128;
  Geometry g{2, 3, 6, 5, 4, 3, 3};
  g.pad[0] = g.pad[1] = 1, g.stride[0] = 2;
  const std::vector<double> x = representable<TestType>(random_values(g.x_size(), 16)),
                            w = representable<TestType>(random_values(g.w_size(), 17)),
                            dy = representable<TestType>(random_values(g.y_size(), 18));
  const cudnnDataType_t type = type_of<TestType>();
  Setup s(g, type, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH);
  require_close(run_forward<TestType>(s, x, w, std::vector<double>(g.y_size(), kNaN),
                                      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM),
                reference_forward(g, x, w), ulp / 2, 1e-5);
  require_close(run_backward_data<TestType>(s, w, dy, std::vector<double>(g.x_size(), kNaN),
                                            CUDNN_CONVOLUTION_BWD_DATA_ALGO_1),
                reference_backward_data(g, dy, w), ulp / 2, 1e-5);
  require_close(run_backward_filter<TestType>(s, x, dy, std::vector<double>(g.w_size(), kNaN),
                                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1),
                reference_backward_filter(g, x, dy), ulp / 2, 1e-5);

  // 16-bit data with 16-bit compute (TRUE_HALF_CONFIG) is not emulated.
  REQUIRE(cudnnSetConvolution2dDescriptor(s.conv.d, 1, 1, 2, 1, 1, 1, CUDNN_CROSS_CORRELATION, type) ==
          CUDNN_STATUS_SUCCESS);
  size_t bytes = 0;
  CHECK(cudnnGetConvolutionForwardWorkspaceSize(s.handle.h, s.x.d, s.w.d, s.conv.d, s.y.d,
                                                CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                                &bytes) == CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE);
}

// ---- bad parameters and faults -----------------------------------------------------------------------

TEST_CASE("emulated cuDNN: every bad parameter returns its status at once", "[emulated_cudnn]") {
  Geometry g{1, 2, 5, 5, 3, 3, 3};
  Setup s(g, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
  DeviceArray<float> x(std::vector<double>(g.x_size(), 1)), w(std::vector<double>(g.w_size(), 1)),
      y(std::vector<double>(g.y_size(), 1));
  DeviceBytes workspace(1 << 16);
  const float one = 1, zero = 0;
  const auto gemm = CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
  auto forward = [&](cudnnHandle_t h, const void* alpha, cudnnTensorDescriptor_t xd, const void* xp,
                     cudnnFilterDescriptor_t wd, cudnnConvolutionFwdAlgo_t algo, void* ws, size_t ws_size,
                     cudnnTensorDescriptor_t yd, void* yp) {
    return cudnnConvolutionForward(h, alpha, xd, xp, wd, w.data(), s.conv.d, algo, ws, ws_size, &zero, yd, yp);
  };
  auto good = [&](cudnnConvolutionFwdAlgo_t algo) {
    return forward(s.handle.h, &one, s.x.d, x.data(), s.w.d, algo, workspace.p, 1 << 16, s.y.d, y.data());
  };
  REQUIRE(good(gemm) == CUDNN_STATUS_SUCCESS);

  SECTION("null pointers") {
    CHECK(forward(nullptr, &one, s.x.d, x.data(), s.w.d, gemm, workspace.p, 1 << 16, s.y.d, y.data()) ==
          CUDNN_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(forward(s.handle.h, nullptr, s.x.d, x.data(), s.w.d, gemm, workspace.p, 1 << 16, s.y.d, y.data()) ==
          CUDNN_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(forward(s.handle.h, &one, nullptr, x.data(), s.w.d, gemm, workspace.p, 1 << 16, s.y.d, y.data()) ==
          CUDNN_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(forward(s.handle.h, &one, s.x.d, nullptr, s.w.d, gemm, workspace.p, 1 << 16, s.y.d, y.data()) ==
          CUDNN_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_cudnn_error(), Contains("cudnnConvolutionForward: x is NULL"));
    CHECK(forward(s.handle.h, &one, s.x.d, x.data(), s.w.d, gemm, nullptr, 1 << 16, s.y.d, y.data()) ==
          CUDNN_STATUS_BAD_PARAM_NULL_POINTER);  // GEMM needs a workspace
    CHECK(cudnnCreate(nullptr) == CUDNN_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(cudnnCreateTensorDescriptor(nullptr) == CUDNN_STATUS_BAD_PARAM_NULL_POINTER);
    int count = 0;
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    CHECK(cudnnGetConvolutionForwardAlgorithm_v7(s.handle.h, s.x.d, s.w.d, s.conv.d, s.y.d, 8, nullptr, perf) ==
          CUDNN_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(cudnnGetConvolutionForwardAlgorithm_v7(s.handle.h, s.x.d, s.w.d, s.conv.d, s.y.d, 0, &count, perf) ==
          CUDNN_STATUS_BAD_PARAM);
  }
  SECTION("descriptors: sizes, strides, geometry, enumerants") {
    CHECK(cudnnSetTensor4dDescriptor(s.x.d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, -2, 5, 5) == CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnSetTensor4dDescriptor(s.x.d, CUDNN_TENSOR_NCHW_VECT_C, CUDNN_DATA_FLOAT, 1, 2, 5, 5) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnSetTensor4dDescriptor(s.x.d, CUDNN_TENSOR_NCHW, CUDNN_DATA_INT8, 1, 2, 5, 5) == CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnSetTensor4dDescriptorEx(s.x.d, CUDNN_DATA_FLOAT, 1, 2, 5, 5, 50, 25, -5, 1) == CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnSetFilter4dDescriptor(s.w.d, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 3, 0, 3, 3) == CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnSetConvolution2dDescriptor(s.conv.d, -1, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnSetConvolution2dDescriptor(s.conv.d, 0, 0, 0, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnSetConvolution2dDescriptor(s.conv.d, 0, 0, 1, 1, 1, 0, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnSetConvolution2dDescriptor(s.conv.d, 0, 0, 1, 1, 1, 1, cudnnConvolutionMode_t(7), CUDNN_DATA_FLOAT) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnSetConvolutionGroupCount(s.conv.d, 0) == CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnSetConvolutionMathType(s.conv.d, cudnnMathType_t(9)) == CUDNN_STATUS_BAD_PARAM);
    // None of the rejected calls changed the descriptors.
    CHECK(good(gemm) == CUDNN_STATUS_SUCCESS);
    TensorDesc unset;
    CHECK(forward(s.handle.h, &one, unset.d, x.data(), s.w.d, gemm, workspace.p, 1 << 16, s.y.d, y.data()) ==
          CUDNN_STATUS_BAD_PARAM);
  }
  SECTION("inconsistent descriptors") {
    TensorDesc wrong;
    REQUIRE(cudnnSetTensor4dDescriptor(wrong.d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 3, 4, 3) == CUDNN_STATUS_SUCCESS);
    CHECK(forward(s.handle.h, &one, s.x.d, x.data(), s.w.d, gemm, workspace.p, 1 << 16, wrong.d, y.data()) ==
          CUDNN_STATUS_BAD_PARAM);  // y should be [1,3,3,3]
    CHECK_THAT(last_cudnn_error(), Contains("yDesc should be [1,3,3,3]"));
    REQUIRE(cudnnSetTensor4dDescriptor(wrong.d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 3, 5, 5) == CUDNN_STATUS_SUCCESS);
    CHECK(forward(s.handle.h, &one, wrong.d, x.data(), s.w.d, gemm, workspace.p, 1 << 16, s.y.d, y.data()) ==
          CUDNN_STATUS_BAD_PARAM);  // 3 channels, the filter has 2
    REQUIRE(cudnnSetTensor4dDescriptor(wrong.d, CUDNN_TENSOR_NCHW, CUDNN_DATA_DOUBLE, 1, 3, 3, 3) ==
            CUDNN_STATUS_SUCCESS);
    CHECK(forward(s.handle.h, &one, s.x.d, x.data(), s.w.d, gemm, workspace.p, 1 << 16, wrong.d, y.data()) ==
          CUDNN_STATUS_BAD_PARAM);  // data types differ
  }
  SECTION("algorithms, workspaces, alignment, layouts") {
    CHECK(good(cudnnConvolutionFwdAlgo_t(42)) == CUDNN_STATUS_BAD_PARAM);
    CHECK(good(CUDNN_CONVOLUTION_FWD_ALGO_DIRECT) == CUDNN_STATUS_NOT_SUPPORTED);
    CHECK(good(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD) == CUDNN_STATUS_NOT_SUPPORTED);
    size_t needed = 0;
    REQUIRE(cudnnGetConvolutionForwardWorkspaceSize(s.handle.h, s.x.d, s.w.d, s.conv.d, s.y.d, gemm, &needed) ==
            CUDNN_STATUS_SUCCESS);
    CHECK(needed == size_t(2 * 3 * 3) * 3 * 3 * sizeof(float));  // im2col: C*R*S rows, OH*OW columns
    CHECK(forward(s.handle.h, &one, s.x.d, x.data(), s.w.d, gemm, workspace.p, needed - 1, s.y.d, y.data()) ==
          CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT);
    CHECK(forward(s.handle.h, &one, s.x.d, reinterpret_cast<char*>(x.data()) + 2, s.w.d, gemm, workspace.p, needed,
                  s.y.d, y.data()) == CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER);
    // An output whose strides make elements share addresses is no layout any algorithm takes.
    TensorDesc overlapping;
    REQUIRE(cudnnSetTensor4dDescriptorEx(overlapping.d, CUDNN_DATA_FLOAT, 1, 3, 3, 3, 27, 9, 1, 1) ==
            CUDNN_STATUS_SUCCESS);
    CHECK(forward(s.handle.h, &one, s.x.d, x.data(), s.w.d, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0,
                  overlapping.d, y.data()) == CUDNN_STATUS_NOT_SUPPORTED_LAYOUT);
    // A stream of another device: only with two emulated GPUs (BRIGADE_EMULATED_GPUS=2).
    int devices = 0;
    REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
    if (devices > 1) {
      cudaStream_t other;
      REQUIRE(cudaSetDevice(1) == cudaSuccess);
      REQUIRE(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) == cudaSuccess);
      REQUIRE(cudaSetDevice(0) == cudaSuccess);
      CHECK(cudnnSetStream(s.handle.h, other) == CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH);
      cudaStreamDestroy(other);
    }
  }
  REQUIRE(synchronise() == cudaSuccess);  // none of it queued anything faulty
}

TEST_CASE("emulated cuDNN: a host pointer is an illegal address reported at the next synchronisation",
          "[emulated_cudnn]") {
  Geometry g{1, 1, 4, 4, 1, 3, 3};
  Setup s(g, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
  std::vector<float> host_x(g.x_size(), 1.0f);
  DeviceArray<float> w(std::vector<double>(g.w_size(), 1)), y(std::vector<double>(g.y_size(), 0));
  const float one = 1, zero = 0;
  // The host checks cannot tell host from device memory; the call succeeds and the work faults.
  REQUIRE(cudnnConvolutionForward(s.handle.h, &one, s.x.d, host_x.data(), s.w.d, w.data(), s.conv.d,
                                  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero, s.y.d,
                                  y.data()) == CUDNN_STATUS_SUCCESS);
  CHECK(synchronise() == cudaErrorLaunchFailure);
  const std::string text = cudaGetErrorString(cudaErrorLaunchFailure);
  CHECK_THAT(text, Contains("cudnnConvolutionForward"));
  CHECK_THAT(text, Contains("not inside one device allocation"));
  // So is a device tensor whose descriptor runs past its allocation.
  DeviceArray<float> short_x(std::vector<double>(g.x_size() - 1, 1));
  REQUIRE(cudnnConvolutionForward(s.handle.h, &one, s.x.d, short_x.data(), s.w.d, w.data(), s.conv.d,
                                  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero, s.y.d,
                                  y.data()) == CUDNN_STATUS_SUCCESS);
  CHECK(synchronise() == cudaErrorLaunchFailure);
  CHECK_THAT(std::string(cudaGetErrorString(cudaErrorLaunchFailure)), Contains("the tensor of xDesc: 64 bytes"));
  CHECK(synchronise() == cudaSuccess);  // reported once
}

// ---- heuristics ----------------------------------------------------------------------------------------

TEST_CASE("emulated cuDNN: the _v7 heuristics rank every algorithm, supported ones first", "[emulated_cudnn]") {
  Geometry g{2, 4, 8, 8, 8, 3, 3};
  g.pad[0] = g.pad[1] = 1;
  Setup s(g, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH);
  int max = 0, count = 0;
  REQUIRE(cudnnGetConvolutionForwardAlgorithmMaxCount(s.handle.h, &max) == CUDNN_STATUS_SUCCESS);
  CHECK(max == CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
  std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(max);
  REQUIRE(cudnnGetConvolutionForwardAlgorithm_v7(s.handle.h, s.x.d, s.w.d, s.conv.d, s.y.d, max, &count, fwd.data()) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(count == max);
  int supported = 0;
  for (int i = 0; i < count; ++i) {
    const auto& p = fwd[size_t(i)];
    INFO("rank " << i << ": algo " << int(p.algo));
    CHECK(p.mathType == CUDNN_FMA_MATH);  // as the descriptor says
    CHECK(p.determinism == CUDNN_DETERMINISTIC);
    if (p.status != CUDNN_STATUS_SUCCESS) {
      CHECK(p.time < 0);
      continue;
    }
    CHECK(i == supported++);  // every supported entry ahead of the unsupported ones
    if (i > 0) CHECK(fwd[size_t(i) - 1].time <= p.time);
    size_t bytes = 0;
    REQUIRE(cudnnGetConvolutionForwardWorkspaceSize(s.handle.h, s.x.d, s.w.d, s.conv.d, s.y.d, p.algo, &bytes) ==
            CUDNN_STATUS_SUCCESS);
    CHECK(p.memory == bytes);
  }
  CHECK(supported == 3);
  CHECK(fwd[0].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
  CHECK(fwd[0].memory > 0);
  REQUIRE(cudnnGetConvolutionForwardAlgorithm_v7(s.handle.h, s.x.d, s.w.d, s.conv.d, s.y.d, 2, &count, fwd.data()) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(count == 2);

  // Backward filter: the atomic-add ALGO_0 and ALGO_3 rank ahead, reported non-deterministic; the
  // deterministic ALGO_1 follows.
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bwf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
  REQUIRE(cudnnGetConvolutionBackwardFilterAlgorithm_v7(s.handle.h, s.x.d, s.y.d, s.conv.d, s.w.d, int(bwf.size()),
                                                        &count, bwf.data()) == CUDNN_STATUS_SUCCESS);
  CHECK((bwf[0].algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 && bwf[0].determinism == CUDNN_NON_DETERMINISTIC));
  CHECK((bwf[1].algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 && bwf[1].determinism == CUDNN_NON_DETERMINISTIC));
  CHECK((bwf[2].algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 && bwf[2].determinism == CUDNN_DETERMINISTIC &&
         bwf[2].status == CUDNN_STATUS_SUCCESS));
  CHECK(bwf[3].status != CUDNN_STATUS_SUCCESS);
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bwd(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
  REQUIRE(cudnnGetConvolutionBackwardDataAlgorithm_v7(s.handle.h, s.w.d, s.y.d, s.conv.d, s.x.d, int(bwd.size()),
                                                      &count, bwd.data()) == CUDNN_STATUS_SUCCESS);
  CHECK((bwd[0].algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 && bwd[0].determinism == CUDNN_NON_DETERMINISTIC));
  CHECK((bwd[1].algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 && bwd[1].determinism == CUDNN_DETERMINISTIC));

  // 16-bit data under the default math type reports tensor cores; FMA math keeps FMA.
  Setup half(g, CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH);
  REQUIRE(cudnnGetConvolutionForwardAlgorithm_v7(half.handle.h, half.x.d, half.w.d, half.conv.d, half.y.d, 1, &count,
                                                 fwd.data()) == CUDNN_STATUS_SUCCESS);
  CHECK(fwd[0].mathType == CUDNN_TENSOR_OP_MATH);
  REQUIRE(cudnnSetConvolutionMathType(half.conv.d, CUDNN_FMA_MATH) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnGetConvolutionForwardAlgorithm_v7(half.handle.h, half.x.d, half.w.d, half.conv.d, half.y.d, 1, &count,
                                                 fwd.data()) == CUDNN_STATUS_SUCCESS);
  CHECK(fwd[0].mathType == CUDNN_FMA_MATH);
}

TEST_CASE("emulated cuDNN: NHWC tensors with an NCHW filter have no deterministic backward algorithm",
          "[emulated_cudnn]") {
  // The fallback configuration: per the support tables, only the atomic-add ALGO_0 of each backward
  // direction takes NHWC activations with a KCRS filter, so a caller that insists on determinism
  // (kernels/cuda/conv_cudnn.cpp's first_acceptable) finds nothing and must use its own kernel.
  Geometry g{2, 3, 6, 6, 4, 3, 3};
  g.pad[0] = g.pad[1] = 1;
  Setup s(g, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH);
  REQUIRE(cudnnSetTensor4dDescriptor(s.x.d, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 2, 3, 6, 6) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnSetTensor4dDescriptor(s.y.d, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 2, 4, 6, 6) == CUDNN_STATUS_SUCCESS);
  int count = 0;
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bwf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
  REQUIRE(cudnnGetConvolutionBackwardFilterAlgorithm_v7(s.handle.h, s.x.d, s.y.d, s.conv.d, s.w.d, int(bwf.size()),
                                                        &count, bwf.data()) == CUDNN_STATUS_SUCCESS);
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bwd(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
  REQUIRE(cudnnGetConvolutionBackwardDataAlgorithm_v7(s.handle.h, s.w.d, s.y.d, s.conv.d, s.x.d, int(bwd.size()),
                                                      &count, bwd.data()) == CUDNN_STATUS_SUCCESS);
  auto deterministic_and_running = [](const auto& perfs) {
    int n = 0;
    for (const auto& p : perfs) n += p.status == CUDNN_STATUS_SUCCESS && p.determinism == CUDNN_DETERMINISTIC;
    return n;
  };
  CHECK(deterministic_and_running(bwf) == 0);
  CHECK(deterministic_and_running(bwd) == 0);
  CHECK((bwf[0].algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 && bwf[0].status == CUDNN_STATUS_SUCCESS));
  CHECK((bwd[0].algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 && bwd[0].status == CUDNN_STATUS_SUCCESS));
  size_t bytes = 0;
  CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(s.handle.h, s.x.d, s.y.d, s.conv.d, s.w.d,
                                                       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                                       &bytes) == CUDNN_STATUS_NOT_SUPPORTED_LAYOUT);
  // The forward pass still has deterministic algorithms (the implicit GEMMs take NHWC).
  std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
  REQUIRE(cudnnGetConvolutionForwardAlgorithm_v7(s.handle.h, s.x.d, s.w.d, s.conv.d, s.y.d, int(fwd.size()), &count,
                                                 fwd.data()) == CUDNN_STATUS_SUCCESS);
  CHECK(deterministic_and_running(fwd) == 2);

  // ALGO_0 computes the right thing on NHWC memory.
  const std::vector<double> x = representable<float>(random_values(g.x_size(), 19)),
                            dy = representable<float>(random_values(g.y_size(), 20));
  auto to_nhwc = [](const std::vector<double>& v, int n, int c, int hw) {
    std::vector<double> out(v.size());
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < c; ++b)
        for (int p = 0; p < hw; ++p) out[(size_t(a) * hw + p) * c + b] = v[(size_t(a) * c + b) * hw + p];
    return out;
  };
  require_close(run_backward_filter<float>(s, to_nhwc(x, 2, 3, 36), to_nhwc(dy, 2, 4, 36),
                                           std::vector<double>(g.w_size(), kNaN), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0),
                reference_backward_filter(g, x, dy), 1e-5, 1e-5);
}

// ---- streams -------------------------------------------------------------------------------------------

TEST_CASE("emulated cuDNN: work runs on the handle's stream with alpha and beta as they were at the call",
          "[emulated_cudnn]") {
  Geometry g{1, 2, 5, 5, 2, 3, 3};
  Setup s(g, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
  cudaStream_t stream;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudnnSetStream(s.handle.h, stream) == CUDNN_STATUS_SUCCESS);
  cudaStream_t got = nullptr;
  REQUIRE(cudnnGetStream(s.handle.h, &got) == CUDNN_STATUS_SUCCESS);
  CHECK(got == stream);
  const std::vector<double> x = representable<float>(random_values(g.x_size(), 21)),
                            w = representable<float>(random_values(g.w_size(), 22));
  DeviceArray<float> dx(x), dw(w), dy(std::vector<double>(g.y_size(), kNaN));
  float alpha = 2, beta = 0;
  REQUIRE(cudnnConvolutionForward(s.handle.h, &alpha, s.x.d, dx.data(), s.w.d, dw.data(), s.conv.d,
                                  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &beta, s.y.d,
                                  dy.data()) == CUDNN_STATUS_SUCCESS);
  alpha = 100, beta = 1;  // too late to matter
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  std::vector<double> want = reference_forward(g, x, w);
  for (double& v : want) v *= 2;
  require_close(dy.read(), want, 1e-5, 1e-6);
  REQUIRE(cudnnSetStream(s.handle.h, nullptr) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

// ---- brigade's call site -------------------------------------------------------------------------------

namespace {

brigade::Tensor cpu_tensor(const brigade::Shape& shape, unsigned seed, brigade::DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  brigade::Tensor t = brigade::empty(shape, brigade::DType::f64, brigade::Device::cpu());
  const std::vector<double> v = random_values(size_t(n), seed);
  std::memcpy(t.data<double>(), v.data(), v.size() * sizeof(double));
  return t.to(dtype);
}

void require_close(const brigade::Tensor& gpu, const brigade::Tensor& cpu, double relative, double absolute) {
  require_close(gpu.to(brigade::Device::cpu()).to_vector(), cpu.to_vector(), relative, absolute);
}

}  // namespace

TEST_CASE("emulated cuDNN: brigade's conv2d_cudnn and its backward passes match brigade's CPU convolution",
          "[emulated_cudnn]") {
  using namespace brigade;
  const Device gpu = Device::cuda(0);
  const int64_t fallbacks = cuda::cudnn_conv_fallbacks();
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    INFO("dtype " << dtype_name(dtype));
    // 16-bit runs are compared with the f32 CPU convolution of the same rounded values.
    const bool narrow = dtype == DType::f16 || dtype == DType::bf16;
    const DType cpu_type = narrow ? DType::f32 : dtype;
    const double relative = dtype == DType::f64 ? 1e-12 : dtype == DType::f32 ? 1e-5 : dtype == DType::f16 ? 2e-3 : 1.6e-2;
    const double absolute = dtype == DType::f64 ? 1e-12 : narrow ? 1e-2 : 1e-5;
    const ops::Conv2dParams p{2, 1};
    const Tensor x = cpu_tensor({2, 3, 7, 6}, 23, dtype), w = cpu_tensor({5, 3, 3, 3}, 24, dtype),
                 bias = cpu_tensor({5}, 25, dtype);
    const Tensor y_cpu = ops::conv2d(x.to(cpu_type), w.to(cpu_type), bias.to(cpu_type), p);
    Tensor y = empty(y_cpu.shape(), dtype, gpu);
    cuda::conv2d_cudnn(y, x.to(gpu), w.to(gpu), bias.to(gpu), p);
    require_close(y, y_cpu, relative, absolute);

    const Tensor dy = cpu_tensor(y_cpu.shape(), 26, dtype);
    Tensor dx = empty(x.shape(), dtype, gpu), dw = empty(w.shape(), dtype, gpu);
    cuda::conv2d_backward_input_cudnn(dx, dy.to(gpu), w.to(gpu), p);
    cuda::conv2d_backward_weight_cudnn(dw, dy.to(gpu), x.to(gpu), p);
    require_close(dx, ops::conv2d_backward_input(dy.to(cpu_type), w.to(cpu_type), x.shape(), p), relative, absolute);
    require_close(dw, ops::conv2d_backward_weight(dy.to(cpu_type), x.to(cpu_type), w.shape(), p), relative, absolute);
  }
  CHECK(cuda::cudnn_conv_fallbacks() == fallbacks);  // every call ran on the emulated cuDNN
}
