// wgmma: Hopper's warpgroup matrix multiply, as the PTX ISA defines it ("Asynchronous Warpgroup Level
// Matrix Multiply-Accumulate Instructions"), for the one form brigade's kernels use:
//
//   wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}.{bf16,f16} d, desc-a, desc-b, scale-d, 1, 1, 0, 0
//
// Four warps (a warpgroup: warps 4i .. 4i+3 of the block) multiply A (64 x 16, shared memory) by B
// (16 x N, shared memory) into D (64 x N, f32, in their registers); scale-d = 0 drops D's old value.
//
// Shared-memory operands ("Matrix Descriptor Format"): a 64-bit descriptor with the start address
// (bits 0-13), leading- and stride-dimension byte offsets (16-29, 32-45), all >> 4, the base offset
// (49-51) and the swizzle mode (62-63). Only the canonical K-major layout with the 128-byte swizzle is
// modelled (imm-trans 0, mode 1, base offset 0): row r of the operand (m for A, n for B), element k,
// is at the shared address
//     start + (r % 8) * 128 + (r / 8) * SBO + 2k
// after the 128-byte swizzle (bits 4-6 ^= bits 7-9, tensor_maps.cpp) — what a TMA box of 64
// 16-bit elements per row, 128-byte swizzled and 1024-aligned, holds; the leading byte offset is
// unused in that layout. A kernel steps through K inside the 128-byte rows by moving the start.
//
// The accumulator fragment ("Register Fragments: Matrix D"): thread t of the warpgroup (warp w = t/32,
// lane l) holds, for each 8-column block j, d[4j .. 4j+3] =
//     D[16w + l/4][8j + 2(l%4) + {0, 1}],  D[16w + l/4 + 8][8j + 2(l%4) + {0, 1}].
//
// Asynchrony: an mma_async only starts the work; its accumulators are defined again once a
// wgmma.wait_group of the thread has retired the group that wgmma.commit_group closed over it, and
// touching them before that is undefined. The emulator takes that at its strictest: the registers
// read NaN from the mma until the wait, and the product is computed at the wait, reading shared
// memory then — so a kernel that refills an operand's buffer before its wait sees the wrong data
// (or the refill's poison). wgmma.fence must come before a thread's first mma_async, and again after
// a wait has handed accumulators back (the ISA asks for it after any other access to them, which the
// emulator cannot see: it takes the hand-back as one).
// Products are exact in f32 and summed in f32 in k order (the hardware's order is unspecified).
// Not modelled: the other layouts and swizzles, register A operands, scale-a/b = -1, other shapes
// and types; warp-level uniformity of the operands is checked, warpgroup-level is not.
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "emulator/simt.h"

namespace brigade::emu {
namespace {

struct Operand {
  uint32_t start, stride_bytes;
};

// One wgmma.mma_async in flight.
struct Mma {
  float* d;
  int n;
  Operand a, b;
  bool accumulate, bf16;
  int group;  // -1 until a commit_group closes one
};

// A thread's wgmma state; the accumulators in flight are kept here (`values`), the registers poisoned.
struct ThreadState {
  bool fenced = false;
  int groups = 0;
  std::vector<Mma> in_flight;
  std::unordered_map<float*, std::vector<float>> values;
};

thread_local uint64_t state_block = ~uint64_t(0);
thread_local std::vector<ThreadState> states;  // by thread of the running block

ThreadState& state() {
  if (state_block != block_serial()) {
    state_block = block_serial();
    states.assign(size_t(block_size.x) * block_size.y * block_size.z, ThreadState{});
  }
  return states[size_t(thread_in_block())];
}

Operand decode(uint64_t desc, const char* which) {
  const std::string name = std::string("wgmma.mma_async's ") + which + " descriptor";
  const unsigned mode = unsigned(desc >> 62), base_offset = unsigned(desc >> 49) & 7u;
  if (mode != 1) kernel_fault(name + " asks for swizzle mode " + std::to_string(mode) + "; the emulator models mode 1 (128-byte) only");
  if (base_offset != 0) kernel_fault(name + " has a base offset of " + std::to_string(base_offset) + "; the emulator models 0 only");
  const Operand op{uint32_t(desc & 0x3fff) << 4, uint32_t((desc >> 32) & 0x3fff) << 4};
  return op;
}

float element(const Operand& op, int row, int k, bool bf16) {
  const uint32_t at = swizzle_128(op.start + uint32_t(row % 8) * 128 + uint32_t(row / 8) * op.stride_bytes + uint32_t(2 * k));
  uint16_t bits;
  std::memcpy(&bits, shared_pointer(at), 2);
  return float_from_16(bits, bf16);
}

// The running thread's share of D for one mma: its 2 rows x N/4 columns.
void compute(const Mma& m, std::vector<float>& d) {
  const int t = thread_in_block() % 128, w = t / 32, l = t % 32;
  for (int j = 0; j < m.n / 8; ++j) {
    for (int i = 0; i < 4; ++i) {
      const int row = 16 * w + l / 4 + (i >= 2 ? 8 : 0), col = 8 * j + 2 * (l % 4) + (i % 2);
      float sum = m.accumulate ? d[size_t(4 * j + i)] : 0.0f;
      for (int k = 0; k < 16; ++k) sum += element(m.a, row, k, m.bf16) * element(m.b, col, k, m.bf16);
      d[size_t(4 * j + i)] = sum;
    }
  }
}

}  // namespace

void wgmma_fence() { state().fenced = true; }

void wgmma_mma_async(float* d, int n, uint64_t desc_a, uint64_t desc_b, bool accumulate, bool bf16_inputs) {
  const size_t threads = size_t(block_size.x) * block_size.y * block_size.z;
  if (threads % 128 != 0)
    kernel_fault("wgmma.mma_async in a block of " + std::to_string(threads) + " threads: a warpgroup needs all 4 of its warps");
  if (n < 8 || n > 256 || n % 8 != 0) kernel_fault("wgmma.mma_async with N = " + std::to_string(n) + " (8 to 256, a multiple of 8)");
  // .sync.aligned: every lane runs the same instruction on the same operands.
  uint64_t all_a[32], all_b[32];
  gather_in_warp(desc_a, all_a);
  gather_in_warp(desc_b, all_b);
  for (int lane = 0; lane < 32; ++lane)
    if (all_a[lane] != desc_a || all_b[lane] != desc_b)
      kernel_fault("wgmma.mma_async with descriptors that differ between the lanes of a warp (.aligned)");
  ThreadState& s = state();
  if (!s.fenced)
    kernel_fault("wgmma.mma_async with no wgmma.fence since the thread's start or since a wait_group handed it "
                 "accumulators back (the ISA wants one before the first wgmma and between any other access to its "
                 "registers and the next; the emulator cannot see those accesses, so it asks after every hand-back)");
  const Mma m{d, n, decode(desc_a, "A"), decode(desc_b, "B"), accumulate, bf16_inputs, -1};
  auto [it, fresh] = s.values.try_emplace(d);
  if (fresh) {
    it->second.assign(d, d + n / 2);  // what the registers held: the input of the first mma on them
    for (int i = 0; i < n / 2; ++i) std::memset(&d[i], 0xff, 4);
  } else if (int(it->second.size()) != n / 2) {
    kernel_fault("wgmma.mma_async on accumulators in flight with another shape");
  }
  s.in_flight.push_back(m);
}

void wgmma_commit_group() {
  ThreadState& s = state();
  for (Mma& m : s.in_flight)
    if (m.group < 0) m.group = s.groups;
  ++s.groups;
}

void wgmma_wait_group(int pending) {
  ThreadState& s = state();
  const int retired_below = s.groups - pending;
  std::vector<Mma> kept;
  for (const Mma& m : s.in_flight) {
    if (m.group >= 0 && m.group < retired_below) compute(m, s.values.at(m.d));
    else kept.push_back(m);
  }
  s.in_flight = std::move(kept);
  // Accumulators with nothing left in flight get their values back.
  for (auto it = s.values.begin(); it != s.values.end();) {
    bool busy = false;
    for (const Mma& m : s.in_flight) busy = busy || m.d == it->first;
    if (busy) {
      ++it;
      continue;
    }
    std::memcpy(it->first, it->second.data(), it->second.size() * sizeof(float));
    it = s.values.erase(it);
    s.fenced = false;  // ordinary instructions may touch them now
  }
}

}  // namespace brigade::emu
