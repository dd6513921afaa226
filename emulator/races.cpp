// The CUDA emulator's race detector: vector clocks over streams, histories per allocation.
//
// Two pieces of GPU work are ordered when one stream runs both, or an event recorded after the first
// is waited for (cudaStreamWaitEvent) before the second is issued, or the host saw the first finish
// (a synchronising call) before issuing the second — and chains of those. Each stream, event and
// the host keeps a clock: for every stream, how many of its items are ordered before this point
// (streams.cpp advances and merges them). Work is then unordered with an earlier item `seq` of
// stream T exactly when the clock it was issued with has clock[T] < seq.
//
// Every device or pinned allocation keeps, per stream, the last item that wrote it and the last that
// read it (the last is enough: a stream's items are ordered among themselves). New work that reads
// an allocation races with an unordered write; new work that writes races with an unordered read or
// write. The verdict depends only on issue order and synchronisation, not on how the threads happened
// to interleave, so a race is found on every run, not only on the unlucky ones.
//
// The granularity is the allocation, as cudaMalloc made it: the caching allocator never splits a
// block, so that is one tensor's block — and because the history stays with the block when the
// allocator hands it to the next tensor, a block reused by another stream before the last user's
// work is ordered before is a race too. Kernels say what they touch through their pointer
// arguments: a pointer to const is read, any other pointer read and written; a word inside a
// structure passed by value that holds the address of a live allocation is read (simt.h). What a
// kernel reaches only through pointers stored in device memory is not seen.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

#include "emulator/streams.h"

namespace brigade::emu {
namespace {

struct Touch {
  uint64_t seq = 0;
  std::string what;
  std::string stream;
};

struct History {
  std::map<int, Touch> writes, reads;  // by stream id
};

struct Histories {
  std::mutex mutex;
  std::map<const void*, History> by_allocation;
};

Histories& histories() {
  static auto* h = new Histories;  // never destroyed: frees may come from static destructors
  return *h;
}

bool unordered(int stream_id, const Clock& clock, int other, const Touch& t) {
  return other != stream_id && (size_t(other) >= clock.size() || clock[size_t(other)] < t.seq);
}

std::string describe_allocation(const void* start, size_t bytes, int device) {
  std::ostringstream s;
  s << (device >= 0 ? "device " + std::to_string(device) + " allocation " : "pinned host allocation ") << start
    << " (" << bytes << " bytes)";
  return s.str();
}

}  // namespace

void merge(Clock& into, const Clock& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

bool races_checked() {
  static const bool on = [] {
    const char* env = std::getenv("BRIGADE_EMULATOR_RACES");
    return env == nullptr || std::string(env) != "0";
  }();
  return on;
}

std::string check_races(int stream_id, const std::string& stream_name, uint64_t seq, const Clock& clock,
                        const std::string& what, const std::vector<Access>& accesses) {
  std::string report;
  Histories& h = histories();
  std::lock_guard<std::mutex> lock(h.mutex);
  for (const Access& access : accesses) {
    size_t bytes = 0;
    int device = -1;
    const void* start = allocation_start(access.pointer, &bytes, &device);
    if (start == nullptr) continue;  // host memory: the launch checks say what is wrong with it
    History& history = h.by_allocation[start];
    auto conflict = [&](const std::map<int, Touch>& touches, const char* their_kind) {
      for (const auto& [other, touch] : touches) {
        if (!unordered(stream_id, clock, other, touch)) continue;
        if (!report.empty()) report += "\n";
        report += "race on " + describe_allocation(start, bytes, device) + ": " + what + " on " + stream_name +
                  (access.write ? " writes it" : " reads it") +
                  (access.in_struct ? " (an address inside a structure argument: is the structure fully initialised?)"
                                    : "") + ", but " + touch.what + " on " + touch.stream +
                  ", which " + their_kind + " it, is not ordered before (no event wait or host synchronisation "
                  "between them)";
      }
    };
    conflict(history.writes, "writes");
    if (access.write) conflict(history.reads, "reads");
    (access.write ? history.writes : history.reads)[stream_id] = Touch{seq, what, stream_name};
  }
  return report;
}

void forget_allocation(const void* start) {
  Histories& h = histories();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.by_allocation.erase(start);
}

}  // namespace brigade::emu
