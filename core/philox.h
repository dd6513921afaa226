// Philox4x32-10 and the distributions brigade draws from it, as inline functions that compile both
// for the host and inside CUDA kernels — so `randn` on a GPU is computed by GPU threads and still
// gives the CPU's numbers bit for bit (core/rng.h is the user-facing API built on this header).
//
// Bitwise agreement needs more than the same generator. The random words are integers, so they agree
// trivially; the trouble is the floating-point math that shapes them:
//
//  - log and cos are not correctly rounded, and glibc's and CUDA's differ in the last bit for some
//    inputs. So brigade computes them itself (log_positive, cos_two_pi below) from operations IEEE
//    754 defines exactly: + - * /, sqrt and fma, in a fixed order.
//  - Compilers may fuse `a * b + c` into one fma (nvcc does by default, GCC does when the target has
//    FMA instructions), which changes the rounding. So every multiply-add here is written as an
//    explicit fma — the same single rounding wherever it runs — and no other product feeds a sum
//    unless that product is exact (multiplying by a power of two).
//
// The polynomials are plain Taylor series with enough terms that truncation is far below one ulp;
// the aim is determinism, not speed.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define BRIGADE_HOST_DEVICE __host__ __device__
#else
#define BRIGADE_HOST_DEVICE
#endif

namespace brigade::philox {

// Four 32-bit words: Philox's counter and its output.
struct Words {
  uint32_t w[4];
};

// The full generator (Salmon et al., SC'11): ten rounds of multiply-xor with a Weyl key schedule.
BRIGADE_HOST_DEVICE inline Words philox4x32(Words counter, uint32_t key0, uint32_t key1) {
  const uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;    // round multipliers
  const uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // key schedule increments
  uint32_t c0 = counter.w[0], c1 = counter.w[1], c2 = counter.w[2], c3 = counter.w[3];
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kMul0) * c0, p1 = uint64_t(kMul1) * c2;
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0), hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c0 = hi1 ^ c1 ^ key0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ key1;
    c3 = lo0;
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

// The form brigade uses: counter = (lo, hi, 0, 0) of a 64-bit index, key = (lo, hi) of the seed.
BRIGADE_HOST_DEVICE inline Words philox4x32(uint64_t counter, uint64_t seed) {
  return philox4x32(Words{{uint32_t(counter), uint32_t(counter >> 32), 0u, 0u}}, uint32_t(seed), uint32_t(seed >> 32));
}

// Natural log of a positive, finite x; within a few ulp, and the same bits on every device.
BRIGADE_HOST_DEVICE inline double log_positive(double x) {
  // x = m * 2^e with m in [sqrt(1/2), sqrt(2)), so log x = e * ln2 + log m with |log m| < 0.35.
  int e = 0;
  double m = ::frexp(x, &e);  // m in [0.5, 1): exact
  if (m < 0x1.6a09e667f3bcdp-1) {  // sqrt(1/2)
    m *= 2;
    e -= 1;
  }
  // log m = 2 atanh(s) with s = (m - 1) / (m + 1) = 2s + 2s^3/3 + 2s^5/5 + ..., |s| < 0.172: ten
  // terms of the series in z = s^2 reach far below double precision.
  const double kSeries[10] = {0x1.5555555555555p-1, 0x1.999999999999ap-2, 0x1.2492492492492p-2,  // 2/3, 2/5, 2/7
                              0x1.c71c71c71c71cp-3, 0x1.745d1745d1746p-3, 0x1.3b13b13b13b14p-3,  // 2/9 .. 2/13
                              0x1.1111111111111p-3, 0x1.e1e1e1e1e1e1ep-4, 0x1.af286bca1af28p-4,  // 2/15 .. 2/19
                              0x1.8618618618618p-4};                                             // 2/21
  const double f = m - 1;  // exact (m is within a factor 2 of 1)
  const double s = f / (2 + f);
  const double z = s * s;
  double p = kSeries[9];
  for (int k = 8; k >= 0; --k) p = ::fma(p, z, kSeries[k]);
  // ln2 split in two so that e * kLn2Hi is exact (kLn2Hi has 33 significant bits).
  const double kLn2Hi = 0x1.62e42fefp-1, kLn2Lo = 0x1.473de6af278edp-34;
  const double tail = ::fma(s * z, p, double(e) * kLn2Lo);
  return ::fma(double(e), kLn2Hi, ::fma(2.0, s, tail));
}

// cos(2 pi u) for u in [0, 1) given with at most 32 fractional bits (as random words are), the same
// bits on every device. Reducing u rather than the angle makes the range reduction exact.
BRIGADE_HOST_DEVICE inline double cos_two_pi(double u) {
  const int quarter = int(4 * u + 0.5);  // nearest multiple of a quarter turn, 0..4
  const double r = u - 0.25 * quarter;   // exact, in [-1/8, 1/8]
  const double x = r * 0x1.921fb54442d18p+2;  // 2 pi r, |x| <= pi/4
  const double y = x * x;
  // cos(2 pi u) = cos(x + quarter * pi/2): cos x, -sin x, -cos x, sin x. Taylor series in y = x^2
  // (nine terms: the tenth is below 2^-58 for |x| <= pi/4).
  if (quarter % 2 == 0) {
    const double kCos[9] = {0x1p+0, -0x1p-1, 0x1.5555555555555p-5, -0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-16,
                            -0x1.27e4fb7789f5cp-22, 0x1.1eed8eff8d898p-29, -0x1.93974a8c07c9dp-37,
                            0x1.ae7f3e733b81fp-45};  // (-1)^k / (2k)!
    double c = kCos[8];
    for (int k = 7; k >= 0; --k) c = ::fma(c, y, kCos[k]);
    return quarter % 4 == 0 ? c : -c;
  }
  const double kSin[9] = {0x1p+0, -0x1.5555555555555p-3, 0x1.1111111111111p-7, -0x1.a01a01a01a01ap-13,
                          0x1.71de3a556c734p-19, -0x1.ae64567f544e4p-26, 0x1.6124613a86d09p-33,
                          -0x1.ae7f3e733b81fp-41, 0x1.952c77030ad4ap-49};  // (-1)^k / (2k+1)!
  double s = kSin[8];
  for (int k = 7; k >= 0; --k) s = ::fma(s, y, kSin[k]);
  const double sin_x = x * s;
  return quarter == 1 ? -sin_x : sin_x;
}

// Element `counter` of the uniform stream: 53 random bits as a double in [0, 1) (exact).
BRIGADE_HOST_DEVICE inline double uniform(uint64_t seed, uint64_t counter) {
  const Words r = philox4x32(counter, seed);
  const uint64_t bits = (uint64_t(r.w[0]) << 21) ^ (uint64_t(r.w[1]) >> 11);
  return double(bits & ((uint64_t(1) << 53) - 1)) * 0x1.0p-53;
}

// The same value scaled to [low, high), with one rounding (fma) so every device agrees. The result
// may still round up to `high` itself; callers that store a narrower type step it back down.
BRIGADE_HOST_DEVICE inline double uniform(uint64_t seed, uint64_t counter, double low, double high) {
  return ::fma(high - low, uniform(seed, counter), low);
}

// Element `counter` of the standard normal stream: Box-Muller on the first two words.
BRIGADE_HOST_DEVICE inline double normal(uint64_t seed, uint64_t counter) {
  const Words r = philox4x32(counter, seed);
  const double u1 = (double(r.w[0]) + 1.0) * 0x1.0p-32;  // (0, 1]: the log is finite
  const double u2 = double(r.w[1]) * 0x1.0p-32;          // [0, 1)
  return ::sqrt(-2.0 * log_positive(u1)) * cos_two_pi(u2);
}

}  // namespace brigade::philox
