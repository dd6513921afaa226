// Who this thread works for and what it holds, for out-of-memory errors.
//
// The allocator knows sizes, not meaning: "tried to allocate 64 MiB, 11.9 GiB in use" does not say
// whether the parameters or the stashed activations filled the device, nor what to change. A higher
// layer that knows (the trainer: "rank 2 (stage 2 of 4): parameters 120 MiB, ...") registers a
// callback for the threads it runs on, and the allocator appends its text to the error. The
// callback is per thread because the ranks of a pipeline may be threads of one process.
#pragma once

#include <functional>
#include <string>

namespace brigade {

// Returns a description of this thread's memory, ending with what to change. Called while an
// out-of-memory error is built, with no allocator lock held; it should not allocate device memory.
using MemoryContext = std::function<std::string()>;

// Registers `context` for the current thread while the scope lives (scopes nest; the innermost wins).
class MemoryContextScope {
 public:
  explicit MemoryContextScope(MemoryContext context);
  ~MemoryContextScope();
  MemoryContextScope(const MemoryContextScope&) = delete;
  MemoryContextScope& operator=(const MemoryContextScope&) = delete;

 private:
  MemoryContext previous_;
};

// The current thread's description, or "" when none is registered (or the callback threw: an error
// about the error must not hide the out-of-memory itself).
std::string memory_context();

}  // namespace brigade
