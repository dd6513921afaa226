// A tiny GPT-2's f32 training step on the CPU holds at most 1.15x the memory its shape says a step
// must hold (tests/step_memory.h; tests/gpu/test_gpu_step_memory.cpp is the bf16 GPU twin). On main
// before the tape freed nodes as it went, the same step held 1.3x. (bf16 on the CPU is not held to
// it: the CPU kernels widen 16-bit data to f32 copies as they go.)
#include <catch2/catch.hpp>

#include "step_memory.h"

using namespace brigade;

TEST_CASE("step memory: a tiny GPT-2's f32 step on the CPU peaks within 1.15x of the floor its shape sets",
          "[nn][memory]") {
  test::require_step_near_floor(Device::cpu(), DType::f32);
}
