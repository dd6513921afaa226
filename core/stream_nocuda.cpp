// core/stream.h in a build without CUDA: no stream or event can exist, so every function that would
// create or use one throws, and the memory statistics are all zero. The CPU path never calls these.
#include "core/device_memory.h"
#include "core/error.h"
#include "core/stream.h"

namespace brigade {
namespace {

[[noreturn]] void unavailable(const char* what) {
  fail(what, ": CUDA is not available in this build (brigade was configured without CUDA)");
}

}  // namespace

struct Stream::Impl {};
struct Event::Impl {};

Stream Stream::create(Device) { unavailable("Stream::create"); }
Stream Stream::default_for(Device) { unavailable("Stream::default_for"); }
Device Stream::device() const { unavailable("Stream::device"); }
void* Stream::raw() const { unavailable("Stream::raw"); }
void Stream::synchronize() const { unavailable("Stream::synchronize"); }
bool Stream::query() const { unavailable("Stream::query"); }
void Stream::wait(const Event&) const { unavailable("Stream::wait"); }

Event Event::create(Device, bool) { unavailable("Event::create"); }
void Event::record(const Stream&) const { unavailable("Event::record"); }
void Event::synchronize() const { unavailable("Event::synchronize"); }
bool Event::query() const { unavailable("Event::query"); }
double Event::elapsed_ms(const Event&) const { unavailable("Event::elapsed_ms"); }
void* Event::raw() const { unavailable("Event::raw"); }

Stream current_stream(Device) { unavailable("current_stream"); }
StreamGuard::StreamGuard(const Stream&) { unavailable("StreamGuard"); }
StreamGuard::~StreamGuard() = default;
void device_synchronize(Device) { unavailable("device_synchronize"); }

CudaMemoryStats cuda_memory_stats(Device) { return {}; }
void reset_peak_memory(Device) {}
void cuda_empty_cache() {}
size_t cuda_runtime_bytes_in_use(Device) { return 0; }
void set_cuda_memory_limit(Device, const DeviceMemoryLimit&, const std::string&) { unavailable("set_cuda_memory_limit"); }
size_t cuda_memory_limit(Device) { return 0; }
void record_stream(const Tensor&, const Stream&) { unavailable("record_stream"); }

}  // namespace brigade
