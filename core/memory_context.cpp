#include "core/memory_context.h"

#include <utility>

namespace brigade {
namespace {
thread_local MemoryContext current;
}  // namespace

MemoryContextScope::MemoryContextScope(MemoryContext context) : previous_(std::exchange(current, std::move(context))) {}

MemoryContextScope::~MemoryContextScope() { current = std::move(previous_); }

std::string memory_context() {
  if (!current) return {};
  try {
    return current();
  } catch (...) {
    return {};
  }
}

}  // namespace brigade
