// Runs a shell command, capturing its output (stdout and stderr together), exit status and time.
#pragma once

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace test {

struct CommandResult {
  int status = -1;  // the exit status, or 128 + N when killed by signal N
  std::string output;
  double seconds = 0;
};

inline CommandResult run_command(const std::string& command) {
  auto start = std::chrono::steady_clock::now();
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

// How often `needle` occurs in `text`.
inline int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The lines of `text` holding `what`, each from `what` on, the throughput (" tok/s", which varies
// from run to run) cut off: what two runs of `brigade train` under different launchers (whose line
// prefixes differ) must print alike.
inline std::vector<std::string> lines_with(const std::string& text, const std::string& what) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(what);
    if (at == std::string::npos) continue;
    std::string rest = line.substr(at);
    if (const size_t tok = rest.find("tok/s"); tok != std::string::npos) rest = rest.substr(0, tok);
    out.push_back(rest);
  }
  return out;
}

}  // namespace test
