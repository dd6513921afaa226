// The CUDA emulator's tensor-core instructions of the mma.sync GEMM (kernels/cuda/mma.cuh), written
// from the PTX ISA: ldmatrix and mma.m16n8k16. Both are warp-collective: each gathers the warp's
// operands (gather_in_warp), then computes the running lane's part.
#include "emulator/simt_internal.h"

#include <cstdint>
#include <cstring>

namespace brigade::emu {

// ldmatrix .x4: lanes 8j..8j+7 give the row addresses of 8x8 matrix j, and lane l receives, in r[j],
// the two 16-bit elements (l/4, 2(l%4)) and (l/4, 2(l%4)+1) of matrix j; with .trans, of its
// transpose: (2(l%4), l/4) and (2(l%4)+1, l/4).
void ldmatrix_x4(uint32_t (&r)[4], uint32_t address, bool transpose) {
  if (address % 16 != 0) kernel_fault("ldmatrix with a row address that is not 16-byte aligned");
  uint64_t rows[32];
  gather_in_warp(address, rows);
  note_shared(address, false, "ldmatrix");  // each lane's own 16-byte row
  const int l = running->current->lane, group = l / 4, pair = l % 4;
  auto element = [&](int matrix, int row, int col) {
    uint16_t v;
    std::memcpy(&v, static_cast<char*>(shared_pointer(uint32_t(rows[8 * matrix + row]))) + 2 * col, 2);
    return uint32_t(v);
  };
  for (int j = 0; j < 4; ++j) {
    r[j] = transpose ? element(j, 2 * pair, group) | element(j, 2 * pair + 1, group) << 16
                     : element(j, group, 2 * pair) | element(j, group, 2 * pair + 1) << 16;
  }
}

// mma.m16n8k16.row.col with f32 accumulators. Lane l (group g = l/4, t = l%4) holds
//   A (16x16): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   B (16x8):  b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]
//   C (16x8):  c0, c1 = C[g][2t..2t+1], c2, c3 = C[g+8][2t..2t+1]
// (the low half of each register is the first element). Products are exact in f32 and summed in
// f32, in k order; the hardware's order is unspecified, so last bits may differ from a GPU's.
void mma_m16n8k16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool bf16_inputs) {
  uint64_t a01[32], a23[32], b01[32];
  gather_in_warp(uint64_t(a[0]) | uint64_t(a[1]) << 32, a01);
  gather_in_warp(uint64_t(a[2]) | uint64_t(a[3]) << 32, a23);
  gather_in_warp(uint64_t(b[0]) | uint64_t(b[1]) << 32, b01);
  auto value = [&](uint32_t bits16) { return float_from_16(bits16, bf16_inputs); };
  auto half_of = [](uint64_t regs, int reg, int half) { return uint32_t(regs >> (32 * reg + 16 * half)) & 0xffffu; };
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * t + h] = value(half_of(a01[lane], 0, h));
      A[g + 8][2 * t + h] = value(half_of(a01[lane], 1, h));
      A[g][2 * t + 8 + h] = value(half_of(a23[lane], 0, h));
      A[g + 8][2 * t + 8 + h] = value(half_of(a23[lane], 1, h));
      B[2 * t + h][g] = value(half_of(b01[lane], 0, h));
      B[2 * t + 8 + h][g] = value(half_of(b01[lane], 1, h));
    }
  }
  const int l = running->current->lane, g = l / 4, t = l % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i % 2);
    float sum = acc[i];
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    acc[i] = sum;
  }
}

}  // namespace brigade::emu
