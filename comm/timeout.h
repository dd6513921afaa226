// Timeouts: every blocking communication call waits until a deadline, never forever.
//
// A peer that crashed, hangs, or was never started looks exactly like a slow one; the only way to
// tell them apart is to stop waiting at some point. Each call turns the communicator's timeout into
// a Deadline once, at its start, so a batch of transfers shares one budget instead of each
// transfer restarting the clock.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace brigade::comm {

using Clock = std::chrono::steady_clock;
using Milliseconds = std::chrono::milliseconds;

// BRIGADE_COMM_TIMEOUT (seconds, may be fractional: "0.5") if set, else 300 s. Generous because a
// pipeline stage legitimately waits for its neighbour's whole forward pass; tests set it low.
// Throws an Error naming the variable when its value is not a positive number.
Milliseconds default_timeout();

// How long connecting may take: the rendezvous through the store and the first handshake with every
// peer. `chosen` if given, else BRIGADE_CONNECT_TIMEOUT (seconds) if set, else the call timeout but
// never under 60 s. Separate because connecting waits for the slowest rank to *start* (load its
// libraries, read its data), which has nothing to do with how long a step's transfer may take: a
// job that wants a missing neighbour found in one second must not also need every process up
// within that second.
Milliseconds connect_timeout(Milliseconds call_timeout, std::optional<Milliseconds> chosen = std::nullopt);

// Parses "30", "2.5" (seconds) into milliseconds; throws naming `what` otherwise.
Milliseconds parse_seconds(const std::string& text, const std::string& what);

// "2.5 s", "300 s", "0.25 s": how durations appear in error messages.
std::string seconds_str(Milliseconds ms);

class Deadline {
 public:
  static Deadline after(Milliseconds timeout) { return Deadline(Clock::now() + timeout, timeout); }

  Clock::time_point at() const { return at_; }
  Milliseconds timeout() const { return timeout_; }  // the budget it was created with
  bool passed() const { return Clock::now() >= at_; }
  // Time left, rounded up to >= 1 ms (libraries treat a zero or negative wait inconsistently).
  Milliseconds remaining() const;

 private:
  Deadline(Clock::time_point at, Milliseconds timeout) : at_(at), timeout_(timeout) {}
  Clock::time_point at_;
  Milliseconds timeout_;
};

}  // namespace brigade::comm
