// Killed by meson's timeout (SIGTERM) or Ctrl-C, a test runs no destructor: what it started (daemons,
// network namespaces) would outlive it. clean_up_on_signal(command) runs a shell command then (fork
// and exec are safe in a signal handler), and the test dies of the signal as asked. The command is
// stored before any signal can come: building strings is no signal handler's business.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace test {

inline char cleanup_command[2048];

extern "C" inline void run_cleanup_command_and_die(int sig) {
  if (pid_t pid = fork(); pid == 0) {
    execl("/bin/sh", "sh", "-c", cleanup_command, nullptr);
    _exit(127);
  } else if (pid > 0) {
    waitpid(pid, nullptr, 0);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

inline void clean_up_on_signal(const std::string& command) {
  if (command.size() >= sizeof cleanup_command) throw std::length_error("clean_up_on_signal: command too long");
  std::strcpy(cleanup_command, command.c_str());
  signal(SIGTERM, run_cleanup_command_and_die);
  signal(SIGINT, run_cleanup_command_and_die);
}

}  // namespace test
