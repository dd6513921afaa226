// The executor's timer (pipeline/executor.cpp): when each action ran, for the trace. Internal to the
// pipeline; a run's trace (pipeline/trace.h) is what users see.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/memory_account.h"
#include "core/stream.h"
#include "pipeline/action.h"
#include "pipeline/trace.h"

namespace brigade::pipeline {

// Times actions: the host clock on the CPU; on a GPU, events on the current stream (what the GPU did,
// not when the host queued it), read back once the run is over.
class ActionTimer {
 public:
  ActionTimer(Device device, bool enabled) : device_(device), enabled_(enabled) {
    if (!enabled_) return;
    if (device_.is_cuda()) {
      origin_event_ = Event::create(device_, true);
      origin_event_.record(current_stream(device_));
    }
    origin_ = Clock::now();
  }
  // Call before an action (or an exchange); returns an index for stop().
  size_t start() {
    if (!enabled_) return 0;
    Mark m;
    if (account_) {  // the bytes this rank holds on the device, around the action (core/memory_account.h)
      m.memory_start = double(account_->allocated());
      account_->begin_window();
    }
    if (device_.is_cuda()) {
      m.begin_event = Event::create(device_, true);
      m.begin_event.record(current_stream(device_));
    } else {
      m.begin = seconds();
    }
    marks_.push_back(m);
    return marks_.size() - 1;
  }
  // After it: the span is recorded for each of `actions` (an exchange covers several messages).
  void stop(size_t index, int rank, std::vector<Action> actions) {
    if (!enabled_) return;
    Mark& m = marks_[index];
    if (device_.is_cuda()) {
      m.end_event = Event::create(device_, true);
      m.end_event.record(current_stream(device_));
    } else {
      m.end = seconds();
    }
    if (account_) {
      m.memory_end = double(account_->allocated());
      m.memory_peak = double(account_->window_peak());
    }
    m.rank = rank;
    m.actions = std::move(actions);
    m.done = true;
  }
  // Appends the finished marks to `trace` (waits for the GPU's last event first).
  void emit(Trace& trace) {
    if (!enabled_) return;
    for (Mark& m : marks_) {
      if (!m.done) continue;
      if (device_.is_cuda()) {
        m.end_event.synchronize();
        m.begin = origin_event_.elapsed_ms(m.begin_event) / 1000;
        m.end = origin_event_.elapsed_ms(m.end_event) / 1000;
      }
      for (const Action& a : m.actions)
        trace.events.push_back({m.rank, a, m.begin, m.end, m.memory_start, m.memory_end, m.memory_peak});
    }
  }

 private:
  struct Mark {
    int rank = 0;
    std::vector<Action> actions;
    double begin = 0, end = 0;
    double memory_start = -1, memory_end = -1, memory_peak = -1;
    Event begin_event, end_event;
    bool done = false;
  };
  using Clock = std::chrono::steady_clock;
  double seconds() const { return std::chrono::duration<double>(Clock::now() - origin_).count(); }

  Device device_;
  bool enabled_;
  // The account of the memory the actions allocate: host memory on the CPU, GPU memory on a GPU.
  std::shared_ptr<MemoryAccount> account_ =
      enabled_ ? current_memory_account(device_.is_cpu() ? MemoryKind::host : MemoryKind::device) : nullptr;
  Clock::time_point origin_;
  Event origin_event_;
  std::vector<Mark> marks_;
};

}  // namespace brigade::pipeline
