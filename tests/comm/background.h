// A command running in the background, with its output going to a file: for tests that must act
// while a job runs (freeze a rank, cut a link) and then time how it ends.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/socket.h"

namespace test {

using Clock = std::chrono::steady_clock;

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A command running in the background, its output in a file. The destructor kills what is left.
class Background {
 public:
  // Runs `command` under /bin/sh in a process group of its own; stdout and stderr go to `log`.
  Background(const std::string& command, const std::string& log) : log_(log) {
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      execl("/bin/sh", "sh", "-c", ("exec " + command + " > " + log + " 2>&1").c_str(), nullptr);
      _exit(127);
    }
    setpgid(pid_, pid_);
  }
  ~Background() {
    if (running()) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }
  bool running() const { return status_ < 0; }
  // The exit status once it ended (128 + N for signal N); -1 while it still runs after `seconds`.
  int wait(double seconds) {
    const auto until = Clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
    while (running()) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        ended_ = Clock::now();
        break;
      }
      if (Clock::now() >= until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status_;
  }
  Clock::time_point started() const { return started_; }
  Clock::time_point ended() const { return ended_; }
  std::string output() const { return read_file(log_); }
  // Waits until the output contains `text`; false after `seconds` or if the command ended first.
  bool wait_for_output(const std::string& text, double seconds) {
    const auto until = Clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
    while (Clock::now() < until) {
      if (output().find(text) != std::string::npos) return true;
      if (wait(0) >= 0) return output().find(text) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int status_ = -1;
  Clock::time_point started_ = Clock::now(), ended_;
};

// A TCP port nobody listens on right now (the kernel's choice, so parallel tests do not collide).
using brigade::comm::free_port;

// The processes whose parent is `parent`, oldest first (from /proc: no procps needed).
inline std::vector<int> children_of(int parent) {
  std::vector<std::pair<unsigned long long, int>> found;  // (start time, pid)
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    // /proc/PID/stat: "pid (comm) state ppid ... starttime(22nd)"; comm may hold spaces, so parse
    // from the last ')'.
    std::string stat = read_file("/proc/" + name + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    std::vector<std::string> f;
    while (fields >> field) f.push_back(field);
    if (f.size() < 20 || std::stoi(f[1]) != parent) continue;
    found.push_back({std::stoull(f[19]), std::stoi(name)});
  }
  std::sort(found.begin(), found.end());
  std::vector<int> pids;
  for (const auto& p : found) pids.push_back(p.second);
  return pids;
}

}  // namespace test
