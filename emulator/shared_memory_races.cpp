// The CUDA emulator's race detector for shared memory (see note_shared below), and st.shared.v4, the
// one plain store that reports to it.
#include "emulator/simt_internal.h"

#include <cstring>
#include <string>

namespace brigade::emu {

// The race detector for shared memory, at 16-byte granularity, for the accesses that go through the
// emulated instructions (ldmatrix reads; cp.async and st.shared.v4 writes — every shared-memory
// access of the tensor-core kernels). Two accesses by different warps, at least one a write, with no
// __syncthreads between them are a race on a GPU: nothing orders them. The emulator's fibers run
// warps in near lockstep, so such a race rarely changes a result here; this finds it whatever the
// interleaving, as compute-sanitizer's racecheck does on a GPU. Plain C++ accesses to __shared__
// arrays are not seen.
void note_shared(uint32_t offset, bool write, const char* what) {
  Block& b = *running;
  const int warp = b.current->warp;
  SharedUse& use = b.shared_uses[offset / 16];
  if (use.epoch != b.epoch) use = SharedUse{b.epoch, -1, 0};
  auto race = [&](int other, const char* earlier) {
    kernel_fault(std::string(what) + " by warp " + std::to_string(warp) + " touches shared bytes [" +
                 std::to_string(offset / 16 * 16) + ", +16) that warp " + std::to_string(other) + " " + earlier +
                 " since the last __syncthreads: a race on a GPU (a barrier is missing between the two)");
  };
  if (use.writer >= 0 && use.writer != warp) race(use.writer, "wrote");
  if (write) {
    const uint32_t others = use.readers & ~(1u << warp);
    if (others) race(__builtin_ctz(others), "read");
    use.writer = warp;
  } else {
    use.readers |= 1u << warp;
  }
}

void store_shared_16(uint32_t dst, const void* v) {
  note_shared(dst, true, "st.shared.v4");
  std::memcpy(shared_pointer(dst), v, 16);
}

}  // namespace brigade::emu
