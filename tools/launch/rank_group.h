// The ranks this launcher runs on its own machine, supervised as one unit.
//
// A job is only as alive as its least alive rank: if one fails, the others will sooner or later
// wait for it until their communication timeout. So the first rank to fail stops the rest (SIGTERM
// to each rank's process group, then SIGKILL after a grace period), and its status becomes the
// group's. Output is relayed line by line, prefixed with the rank's place in the whole job.
//
// poll() does a little of everything and returns, so the launcher can interleave it with talking
// to the other machines' launchers (node_link.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "launch/output.h"

namespace brigade::launch {

class RankGroup {
 public:
  // One process per environment; envs[i] is the full environment of the rank numbered ranks[i].
  // Throws std::runtime_error when a process cannot be started (and kills the ones that were).
  RankGroup(const std::vector<std::string>& command, const std::vector<std::vector<std::string>>& envs,
            const std::vector<int>& ranks, double grace_seconds);
  ~RankGroup();  // kills whatever still runs
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  // Relays output (waiting up to `wait_ms` for some), reaps ranks that exited, and on the first
  // failure stops the others. Returns true once every rank has exited and its output is drained.
  bool poll(int wait_ms);

  // Stops every rank (SIGTERM, SIGKILL after the grace period), saying why. Idempotent.
  void stop(const std::string& why);

  bool stopping() const { return stopping_; }
  // The first failure, once there is one: the failing rank's exit code (128 + N for signal N).
  int failure_code() const { return failure_code_; }
  const std::string& failure() const { return failure_; }  // "rank 1 exited with status 7", or empty

  struct Rank;  // one process and its pipes (rank_group.cpp)

 private:
  void release();  // kills what still runs, reaps it, closes the pipes
  void reap();
  void relay(int wait_ms);
  void signal_all(int sig);

  std::vector<std::unique_ptr<Rank>> ranks_;
  double grace_seconds_;
  bool stopping_ = false;
  int failure_code_ = 0;
  std::string failure_;
  std::chrono::steady_clock::time_point kill_at_ = std::chrono::steady_clock::time_point::max();
  std::chrono::steady_clock::time_point drain_until_ = std::chrono::steady_clock::time_point::max();
};

// "exited with status 7", "was killed by signal 9 (Killed)"; and the exit code a shell would show.
std::string describe_status(int wait_status);
int exit_code_of(int wait_status);

// Writes the whole text to a file descriptor (ours, stdout or stderr), retrying short writes.
void write_all(int fd, const std::string& text);
void say(const std::string& text);  // "brigade launch: <text>" on stderr

}  // namespace brigade::launch
