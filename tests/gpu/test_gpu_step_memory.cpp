// A tiny GPT-2's bf16 training step on a GPU (the emulator in CI) holds at most 1.15x the memory its
// shape says a step must hold (tests/step_memory.h). On main before the tape freed nodes as it went
// and the loss took bf16 logits, the same step held 1.57x.
#include <catch2/catch.hpp>

#include "step_memory.h"

using namespace brigade;

TEST_CASE("gpu step memory: a tiny GPT-2's bf16 step peaks within 1.15x of the floor its shape sets",
          "[gpu][train][memory]") {
  test::require_step_near_floor(Device::cuda(0), DType::bf16);
}
