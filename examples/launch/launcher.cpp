#include "launch/launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "launch/output.h"

namespace brigade::launch {

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void system_error(const std::string& what) {
  throw std::runtime_error("brigade launch: " + what + ": " + std::strerror(errno));
}

void write_all(int fd, const std::string& text) {
  const char* p = text.data();
  size_t n = text.size();
  while (n > 0) {
    ssize_t written = write(fd, p, n);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;  // our own stdout is gone: nothing useful left to do with the text
    p += written;
    n -= size_t(written);
  }
}

void say(const std::string& text) { write_all(2, "brigade launch: " + text + "\n"); }

// ---- the rendezvous the ranks will use ----

struct Rendezvous {
  std::vector<std::pair<std::string, std::string>> set;  // variables for every rank
  std::vector<std::string> unset;                          // inherited ones that would contradict them
  std::string directory;                                   // to remove at the end (file store)
  ~Rendezvous() {
    std::error_code ignored;
    if (!directory.empty()) std::filesystem::remove_all(directory, ignored);
  }
};

// A port nobody listens on right now. Another process could take it before rank 0 binds it; that
// race is rare and fails loudly (rank 0 reports the port is taken).
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) system_error("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    system_error("finding a free port");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

void prepare(Rendezvous& r, const std::string& store) {
  if (store == "file") {
    std::string pattern = (std::filesystem::temp_directory_path() / "brigade-launch-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) system_error("creating a store directory");
    r.directory = pattern;
    r.set.push_back({"BRIGADE_COMM_STORE", pattern});
    r.unset = {"MASTER_ADDR", "MASTER_PORT"};
  } else {
    r.set.push_back({"MASTER_ADDR", "127.0.0.1"});
    r.set.push_back({"MASTER_PORT", std::to_string(free_port())});
    r.unset = {"BRIGADE_COMM_STORE"};
  }
}

// ---- the ranks ----

struct Rank {
  pid_t pid = -1;
  bool running = false;
  int status = 0;          // as from waitpid
  int out = -1, err = -1;  // read ends of its stdout/stderr pipes, -1 once closed
  std::unique_ptr<LinePrefixer> out_lines, err_lines;
};

// The environment of rank `r`: ours, minus contradicting variables, plus its place in the job.
std::vector<std::string> environment_for(int r, const LaunchOptions& o, const Rendezvous& rendezvous) {
  std::vector<std::pair<std::string, std::string>> set = rendezvous.set;
  set.push_back({"RANK", std::to_string(r)});
  set.push_back({"WORLD_SIZE", std::to_string(o.nprocs)});
  set.push_back({"LOCAL_RANK", std::to_string(r)});
  set.push_back({"LOCAL_WORLD_SIZE", std::to_string(o.nprocs)});
  set.push_back({"BRIGADE_LAUNCH", "1"});
  if (!o.timeout.empty()) set.push_back({"BRIGADE_COMM_TIMEOUT", o.timeout});
  if (!o.connect_timeout.empty()) set.push_back({"BRIGADE_CONNECT_TIMEOUT", o.connect_timeout});
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e, name = entry.substr(0, entry.find('='));
    bool replaced = std::find(rendezvous.unset.begin(), rendezvous.unset.end(), name) != rendezvous.unset.end();
    for (const auto& [n, v] : set) replaced = replaced || n == name;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

// Starts rank `r` in its own process group (so a signal reaches whatever it starts, too).
void start(Rank& rank, int r, const LaunchOptions& o, const Rendezvous& rendezvous) {
  // Everything the child needs is built before fork(): between fork and exec only async-signal-safe
  // calls are allowed.
  std::vector<std::string> env_strings = environment_for(r, o, rendezvous);
  std::vector<char*> argv, envp;
  for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string cannot_run = "brigade launch: cannot run '" + o.command[0] + "': ";
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) system_error("pipe");
  pid_t pid = fork();
  if (pid < 0) system_error("fork");
  if (pid == 0) {
    setpgid(0, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execvpe(argv[0], argv.data(), envp.data());
    const char* reason = strerror(errno);  // glibc's is safe enough here: a static table
    (void)!write(2, cannot_run.data(), cannot_run.size());
    (void)!write(2, reason, strlen(reason));
    (void)!write(2, "\n", 1);
    _exit(127);
  }
  setpgid(pid, pid);  // also here: whichever runs first, the group exists before we signal it
  close(out[1]);
  close(err[1]);
  rank.pid = pid;
  rank.running = true;
  rank.out = out[0];
  rank.err = err[0];
  std::string prefix = "[rank " + std::to_string(r) + "] ";
  rank.out_lines = std::make_unique<LinePrefixer>(prefix);
  rank.err_lines = std::make_unique<LinePrefixer>(prefix);
}

void signal_all(std::vector<Rank>& ranks, int sig) {
  for (Rank& rank : ranks)
    if (rank.running) kill(-rank.pid, sig);
}

// Moves whatever is readable from the ranks' pipes to our stdout/stderr; waits up to `wait_ms`.
void relay(std::vector<Rank>& ranks, int wait_ms) {
  std::vector<pollfd> fds;
  std::vector<std::pair<Rank*, bool>> owners;  // (rank, is stderr)
  for (Rank& rank : ranks) {
    if (rank.out >= 0) {
      fds.push_back({rank.out, POLLIN, 0});
      owners.push_back({&rank, false});
    }
    if (rank.err >= 0) {
      fds.push_back({rank.err, POLLIN, 0});
      owners.push_back({&rank, true});
    }
  }
  if (fds.empty()) return;
  if (poll(fds.data(), fds.size(), wait_ms) <= 0) return;
  char buffer[65536];
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    auto [rank, is_err] = owners[i];
    int& fd = is_err ? rank->err : rank->out;
    LinePrefixer& lines = is_err ? *rank->err_lines : *rank->out_lines;
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) {
      write_all(is_err ? 2 : 1, lines.feed(buffer, size_t(n)));
    } else {  // end of stream (or an error, which ends it too)
      write_all(is_err ? 2 : 1, lines.flush());
      close(fd);
      fd = -1;
    }
  }
}

std::string describe(int status) {
  if (WIFSIGNALED(status))
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

int exit_code(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

volatile sig_atomic_t interrupted = 0;  // the signal that asked the launcher to stop, or 0
extern "C" void on_signal(int sig) { interrupted = sig; }

}  // namespace

int run_ranks(const LaunchOptions& o) {
  Rendezvous rendezvous;
  prepare(rendezvous, o.store);

  struct sigaction action{}, old_int{}, old_term{};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  interrupted = 0;
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);

  std::vector<Rank> ranks(size_t(o.nprocs));
  int result = 0;
  bool stopping = false;  // the first failure (or an interrupt) happened: the rest are being stopped
  Clock::time_point kill_at{};
  try {
    for (int r = 0; r < o.nprocs; ++r) start(ranks[size_t(r)], r, o, rendezvous);
  } catch (...) {
    signal_all(ranks, SIGKILL);
    for (Rank& rank : ranks)
      if (rank.running) waitpid(rank.pid, nullptr, 0);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    throw;
  }

  auto stop_others = [&](const std::string& why) {
    stopping = true;
    say(why);
    signal_all(ranks, SIGTERM);
    kill_at = Clock::now() + std::chrono::milliseconds(int64_t(o.grace_seconds * 1000));
  };

  int running = o.nprocs;
  auto drain_until = Clock::time_point::max();
  for (;;) {
    relay(ranks, 50);
    // Reap whoever finished.
    for (size_t r = 0; r < ranks.size(); ++r) {
      Rank& rank = ranks[r];
      if (!rank.running || waitpid(rank.pid, &rank.status, WNOHANG) != rank.pid) continue;
      rank.running = false;
      --running;
      bool failed = !WIFEXITED(rank.status) || WEXITSTATUS(rank.status) != 0;
      if (failed && !stopping) {
        result = exit_code(rank.status);
        stop_others("rank " + std::to_string(r) + " " + describe(rank.status) + "; stopping the other ranks");
      }
    }
    if (interrupted && !stopping) {
      result = 128 + interrupted;
      stop_others(std::string("interrupted (") + strsignal(interrupted) + "); stopping the ranks");
    }
    if (stopping && running > 0 && Clock::now() >= kill_at) {
      say("grace period over; killing the remaining ranks");
      signal_all(ranks, SIGKILL);
      kill_at = Clock::time_point::max();
    }
    if (running == 0) {
      // Everyone exited; their output may still sit in the pipes — unless something they started
      // keeps a pipe open, so drain for a moment only.
      if (drain_until == Clock::time_point::max()) drain_until = Clock::now() + std::chrono::seconds(2);
      bool open = false;
      for (Rank& rank : ranks) open = open || rank.out >= 0 || rank.err >= 0;
      if (!open || Clock::now() >= drain_until) break;
    }
  }
  for (Rank& rank : ranks) {
    if (rank.out >= 0) close(rank.out);
    if (rank.err >= 0) close(rank.err);
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return result;
}

}  // namespace brigade::launch
