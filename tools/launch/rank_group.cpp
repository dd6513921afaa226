#include "launch/rank_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace brigade::launch {

using Clock = std::chrono::steady_clock;

struct RankGroup::Rank {
  int number = 0;  // its rank in the whole job
  pid_t pid = -1;
  bool running = false;
  int status = 0;          // as from waitpid
  int out = -1, err = -1;  // read ends of its stdout/stderr pipes, -1 once closed
  std::unique_ptr<LinePrefixer> out_lines, err_lines;
};

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

std::string describe_status(int status) {
  if (WIFSIGNALED(status))
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

int exit_code_of(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

namespace {

[[noreturn]] void system_error(const std::string& what) {
  throw std::runtime_error("brigade launch: " + what + ": " + std::strerror(errno));
}

// Starts one rank in its own process group (so a signal reaches whatever it starts, too).
void start(RankGroup::Rank& rank, const std::vector<std::string>& command, const std::vector<std::string>& env);

}  // namespace

RankGroup::RankGroup(const std::vector<std::string>& command, const std::vector<std::vector<std::string>>& envs,
                     const std::vector<int>& ranks, double grace_seconds)
    : grace_seconds_(grace_seconds) {
  try {
    for (size_t i = 0; i < envs.size(); ++i) {
      ranks_.push_back(std::make_unique<Rank>());
      ranks_.back()->number = ranks[i];
      start(*ranks_.back(), command, envs[i]);
    }
  } catch (...) {
    // A constructor that throws gets no destructor call: end the ranks already started here.
    release();
    throw;
  }
}

RankGroup::~RankGroup() { release(); }

void RankGroup::release() {
  signal_all(SIGKILL);
  for (auto& rank : ranks_) {
    if (rank->running) waitpid(rank->pid, nullptr, 0);
    rank->running = false;
    if (rank->out >= 0) close(rank->out);
    if (rank->err >= 0) close(rank->err);
    rank->out = rank->err = -1;
  }
}

void RankGroup::signal_all(int sig) {
  for (auto& rank : ranks_)
    if (rank->running) kill(-rank->pid, sig);
}

void RankGroup::stop(const std::string& why) {
  if (stopping_) return;
  stopping_ = true;
  say(why);
  signal_all(SIGTERM);
  kill_at_ = Clock::now() + std::chrono::milliseconds(int64_t(grace_seconds_ * 1000));
}

bool RankGroup::poll(int wait_ms) {
  relay(wait_ms);
  reap();
  if (stopping_ && Clock::now() >= kill_at_) {
    bool any = false;
    for (auto& rank : ranks_) any = any || rank->running;
    if (any) say("grace period over; killing the remaining ranks");
    signal_all(SIGKILL);
    kill_at_ = Clock::time_point::max();
  }
  for (auto& rank : ranks_)
    if (rank->running) return false;
  // Everyone exited; their output may still sit in the pipes — unless something they started keeps
  // a pipe open, so drain for a moment only.
  if (drain_until_ == Clock::time_point::max()) drain_until_ = Clock::now() + std::chrono::seconds(2);
  bool open = false;
  for (auto& rank : ranks_) open = open || rank->out >= 0 || rank->err >= 0;
  return !open || Clock::now() >= drain_until_;
}

void RankGroup::reap() {
  for (auto& rank : ranks_) {
    if (!rank->running || waitpid(rank->pid, &rank->status, WNOHANG) != rank->pid) continue;
    rank->running = false;
    const bool failed = !WIFEXITED(rank->status) || WEXITSTATUS(rank->status) != 0;
    if (failed && failure_.empty()) {
      failure_code_ = exit_code_of(rank->status);
      failure_ = "rank " + std::to_string(rank->number) + " " + describe_status(rank->status);
      stop(failure_ + "; stopping the other ranks");
    }
  }
}

// Moves whatever is readable from the ranks' pipes to our stdout/stderr; waits up to `wait_ms`.
void RankGroup::relay(int wait_ms) {
  std::vector<pollfd> fds;
  std::vector<std::pair<Rank*, bool>> owners;  // (rank, is stderr)
  for (auto& rank : ranks_) {
    if (rank->out >= 0) {
      fds.push_back({rank->out, POLLIN, 0});
      owners.push_back({rank.get(), false});
    }
    if (rank->err >= 0) {
      fds.push_back({rank->err, POLLIN, 0});
      owners.push_back({rank.get(), true});
    }
  }
  if (fds.empty()) {
    if (wait_ms > 0) ::poll(nullptr, 0, wait_ms);
    return;
  }
  if (::poll(fds.data(), fds.size(), wait_ms) <= 0) return;
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

namespace {

void start(RankGroup::Rank& rank, const std::vector<std::string>& command, const std::vector<std::string>& env) {
  // Everything the child needs is built before fork(): between fork and exec only async-signal-safe
  // calls are allowed.
  std::vector<std::string> env_strings = env;
  std::vector<char*> argv, envp;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string cannot_run = "brigade launch: cannot run '" + command[0] + "': ";
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) system_error("pipe");
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    system_error("pipe");
  }
  pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    system_error("fork");
  }
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
  std::string prefix = "[rank " + std::to_string(rank.number) + "] ";
  rank.out_lines = std::make_unique<LinePrefixer>(prefix);
  rank.err_lines = std::make_unique<LinePrefixer>(prefix);
}

}  // namespace

}  // namespace brigade::launch
