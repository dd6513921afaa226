#include "launch/launcher.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/socket.h"
#include "launch/node_link.h"
#include "launch/rank_group.h"

namespace brigade::launch {

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void system_error(const std::string& what) {
  throw std::runtime_error("brigade launch: " + what + ": " + std::strerror(errno));
}

volatile sig_atomic_t interrupted = 0;  // the signal that asked the launcher to stop, or 0
extern "C" void on_signal(int sig) { interrupted = sig; }

// Ctrl-C or SIGTERM to the launcher stops the ranks like a failure does, instead of killing the
// launcher and orphaning them. Restored on the way out.
class SignalGuard {
 public:
  SignalGuard() {
    struct sigaction action{};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    interrupted = 0;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_{}, old_term_{};
};

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

// Rank 0's store listens on every interface, so the port must be free on all of them.
int free_store_port() {
  const int port = comm::free_port();
  if (port < 0) system_error("finding a free port");
  return port;
}

// Fresh for every start of the job: a restarted job meets in an empty store.
void prepare(Rendezvous& r, const LaunchOptions& o, int store_port) {
  if (o.store == "file") {
    std::string pattern = (std::filesystem::temp_directory_path() / "brigade-launch-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) system_error("creating a store directory");
    r.directory = pattern;
    r.set.push_back({"BRIGADE_COMM_STORE", pattern});
    r.unset = {"MASTER_ADDR", "MASTER_PORT"};
  } else {
    r.set.push_back({"MASTER_ADDR", o.master_addr.empty() ? "127.0.0.1" : o.master_addr});
    r.set.push_back({"MASTER_PORT", std::to_string(store_port)});
    r.unset = {"BRIGADE_COMM_STORE"};
  }
}

// The environment of this node's `local`-th rank: ours, minus contradicting variables, plus its
// place in the job.
std::vector<std::string> environment_for(int local, int restart, const LaunchOptions& o, const Rendezvous& r) {
  std::vector<std::pair<std::string, std::string>> set = r.set;
  set.push_back({"RANK", std::to_string(o.node_rank * o.nprocs + local)});
  set.push_back({"WORLD_SIZE", std::to_string(o.nnodes * o.nprocs)});
  set.push_back({"LOCAL_RANK", std::to_string(local)});
  set.push_back({"LOCAL_WORLD_SIZE", std::to_string(o.nprocs)});
  set.push_back({"BRIGADE_LAUNCH", "1"});
  set.push_back({"BRIGADE_RESTART_COUNT", std::to_string(restart)});
  if (!o.timeout.empty()) set.push_back({"BRIGADE_COMM_TIMEOUT", o.timeout});
  if (!o.connect_timeout.empty()) set.push_back({"BRIGADE_CONNECT_TIMEOUT", o.connect_timeout});
  // Ranks exchange over NCCL, whose kernels wait on the GPU for their peers; under CUDA's lazy module
  // loading a rank's first launch of a kernel may wait for its GPU to go idle, and so for a peer
  // (core/cuda/module_loading.h). Eager unless the user chose.
  if (std::getenv("CUDA_MODULE_LOADING") == nullptr) set.push_back({"CUDA_MODULE_LOADING", "EAGER"});
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e, name = entry.substr(0, entry.find('='));
    bool replaced = std::find(r.unset.begin(), r.unset.end(), name) != r.unset.end();
    for (const auto& [n, v] : set) replaced = replaced || n == name;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

std::unique_ptr<RankGroup> start_ranks(const LaunchOptions& o, int restart, const Rendezvous& r) {
  std::vector<std::vector<std::string>> envs;
  std::vector<int> numbers;
  for (int local = 0; local < o.nprocs; ++local) {
    envs.push_back(environment_for(local, restart, o, r));
    numbers.push_back(o.node_rank * o.nprocs + local);
  }
  return std::make_unique<RankGroup>(o.command, envs, numbers, o.grace_seconds);
}

// How long launchers wait to meet: --connect-timeout, else --timeout, else the library's 300 s.
Milliseconds meeting_time(const LaunchOptions& o) {
  const std::string& text = !o.connect_timeout.empty() ? o.connect_timeout : o.timeout;
  return Milliseconds(text.empty() ? 300000 : int64_t(std::stod(text) * 1000));
}

Milliseconds node_silence(const LaunchOptions& o) { return Milliseconds(int64_t(o.node_timeout_seconds * 1000)); }

// A number from a peer launcher's line; -1 when it is not one (nothing a launcher sends is negative).
int to_int(const std::string& text) {
  try {
    size_t used = 0;
    int v = std::stoi(text, &used);
    return used == text.size() ? v : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string rest_after(const std::string& line, size_t words_to_skip) {
  size_t at = 0;
  for (size_t i = 0; i < words_to_skip && at != std::string::npos; ++i) {
    at = line.find(' ', at);
    if (at != std::string::npos) ++at;
  }
  return at == std::string::npos ? "" : line.substr(at);
}

// ---- node 0: decides when the job starts, stops, restarts and ends ----

// How one run of the job ended, on every node.
struct Outcome {
  bool failed = false;
  int code = 0;             // the first failure's exit code (never 0 once failed)
  std::string what;         // "rank 1 exited with status 7"
  bool restartable = true;  // false once an interrupt or a lost node is among the failures
};

class Coordinator {
 public:
  explicit Coordinator(const LaunchOptions& o) : o_(o), nodes_(size_t(o.nnodes)) {}

  int run() {
    if (o_.nnodes > 1) meet_the_nodes();
    for (int restart = 0;; ++restart) {
      const Outcome outcome = run_once(restart);
      if (!outcome.failed) {
        broadcast("exit 0");
        return 0;
      }
      if (!outcome.restartable || restart >= o_.max_restarts) {
        if (o_.max_restarts > 0 && outcome.restartable)
          say("no restarts left (--max-restarts " + std::to_string(o_.max_restarts) + ")");
        broadcast("exit " + std::to_string(outcome.code));
        return outcome.code;
      }
      say("restarting the job (restart " + std::to_string(restart + 1) + " of " + std::to_string(o_.max_restarts) +
          ") after: " + outcome.what);
    }
  }

 private:
  enum class Node { running, finished, lost };

  // Waits until every other node's launcher said hello, up to the connect timeout.
  void meet_the_nodes() {
    const int fd = listen_for_nodes(o_.master_port);
    struct CloseOnExit {
      int fd;
      ~CloseOnExit() { close(fd); }
    } closer{fd};
    const auto deadline = Clock::now() + meeting_time(o_);
    std::vector<std::unique_ptr<NodeLink>> unnamed;  // connected, hello not read yet
    for (int met = 1; met < o_.nnodes; ::poll(nullptr, 0, 20)) {
      if (interrupted)
        throw std::runtime_error(std::string("brigade launch: interrupted (") + strsignal(interrupted) +
                                 ") while waiting for the other nodes");
      if (Clock::now() > deadline) {
        std::string missing;
        for (int k = 1; k < o_.nnodes; ++k)
          if (!nodes_[size_t(k)]) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
        throw std::runtime_error("brigade launch: node(s) " + missing + " never connected to " + o_.master_addr + ":" +
                                 std::to_string(o_.master_port) + " within " +
                                 std::to_string(meeting_time(o_).count() / 1000) +
                                 " s (were they started, with this --master-addr, --master-port and --nnodes?)");
      }
      while (auto link = accept_node(fd, node_silence(o_))) unnamed.push_back(std::move(link));
      // A node that joined and then vanished cannot be waited for.
      for (int k = 1; k < o_.nnodes; ++k) {
        NodeLink* node = nodes_[size_t(k)].get();
        if (node == nullptr) continue;
        node->next_line();  // nothing is expected yet; this notices a lost link
        if (node->lost())
          throw std::runtime_error("brigade launch: lost node " + std::to_string(k) + "'s launcher (" +
                                   node->why_lost() + ") while waiting for the other nodes");
      }
      for (auto& link : unnamed) {
        if (!link) continue;
        if (std::optional<std::string> line = link->next_line()) {
          auto w = words(*line);
          // hello <node rank> <nnodes> <nprocs>
          const bool valid =
              w.size() == 4 && w[0] == "hello" && to_int(w[2]) == o_.nnodes && to_int(w[3]) == o_.nprocs;
          const int k = w.size() == 4 ? to_int(w[1]) : -1;
          if (valid && k > 0 && k < o_.nnodes && !nodes_[size_t(k)]) {
            nodes_[size_t(k)] = std::move(link);
            ++met;
            continue;
          }
          link->send("refused: this job has --nnodes " + std::to_string(o_.nnodes) + " and -n " +
                     std::to_string(o_.nprocs) + " on every node, and node " + std::to_string(k) +
                     (k > 0 && k < o_.nnodes ? " already joined" : " is not one of its nodes"));
          say("refused a launcher from " + link->peer() + ": '" + *line + "'");
        }
        if (link->lost()) link.reset();
      }
    }
  }

  void broadcast(const std::string& line) {
    for (auto& node : nodes_)
      if (node) node->send(line);
  }

  // One run of the job on every node.
  Outcome run_once(int restart) {
    Rendezvous rendezvous;
    const int store_port = o_.store == "tcp" ? free_store_port() : 0;
    prepare(rendezvous, o_, store_port);
    broadcast("start " + std::to_string(restart) + " " + std::to_string(store_port));
    std::unique_ptr<RankGroup> ranks = start_ranks(o_, restart, rendezvous);
    Outcome outcome;
    std::vector<Node> state(size_t(o_.nnodes), Node::running);  // [0] unused: node 0's ranks are `ranks`
    auto fail = [&](int code, const std::string& what, bool restartable) {
      // Later failures are usually consequences of the first; but one that forbids a restart
      // (an interrupt, a lost node) forbids it whenever it comes.
      if (outcome.failed && outcome.restartable && !restartable) say(what + ": the job cannot be restarted");
      outcome.restartable = outcome.restartable && restartable;
      if (outcome.failed) return;
      outcome.failed = true;
      outcome.code = code > 0 ? code : 1;
      outcome.what = what;
      ranks->stop(what + (o_.nnodes > 1 ? "; stopping the ranks of every node" : "; stopping the ranks"));
      broadcast("stop " + what);
    };
    for (;;) {
      const bool mine_done = ranks->poll(50);
      if (!ranks->failure().empty()) fail(ranks->failure_code(), ranks->failure(), true);
      if (interrupted)
        fail(128 + interrupted,
             std::string(o_.nnodes > 1 ? "node 0 was interrupted (" : "interrupted (") + strsignal(interrupted) + ")",
             false);
      bool all_done = mine_done;
      for (int k = 1; k < o_.nnodes; ++k) {
        NodeLink* node = nodes_[size_t(k)].get();
        if (node == nullptr) continue;  // lost in an earlier run: no restart reaches here then
        // Every link is read on every turn, finished or not, so a late loss is noticed too.
        while (std::optional<std::string> line = node->next_line()) {
          auto w = words(*line);
          if (w.size() >= 3 && w[0] == "failed") {  // failed <code> <restartable> <what>
            std::string what = rest_after(*line, 3);
            fail(to_int(w[1]), what.empty() ? "a rank of node " + std::to_string(k) + " failed" : what, w[2] == "1");
          } else if (w.size() == 2 && w[0] == "finished") {  // finished <code>: its ranks are all gone
            state[size_t(k)] = Node::finished;
            if (to_int(w[1]) != 0)
              fail(to_int(w[1]), "node " + std::to_string(k) + "'s ranks failed (status " + w[1] + ")", true);
          }
        }
        if (state[size_t(k)] == Node::running && node->lost()) {
          state[size_t(k)] = Node::lost;
          fail(1, "lost node " + std::to_string(k) + "'s launcher (" + node->why_lost() + ")", false);
          nodes_[size_t(k)].reset();
        }
        all_done = all_done && state[size_t(k)] != Node::running;
      }
      // Waiting for every node matters only before a restart (all ranks of the last run must be gone
      // first); a job that is over need not wait on a node it cannot reach.
      const bool over = outcome.failed && (!outcome.restartable || restart >= o_.max_restarts);
      if (all_done || (mine_done && over)) return outcome;
    }
  }

  const LaunchOptions& o_;
  std::vector<std::unique_ptr<NodeLink>> nodes_;  // [k]: node k's link (null for node 0 and lost nodes)
};

// ---- every other node: does what node 0 says ----

class Follower {
 public:
  explicit Follower(const LaunchOptions& o) : o_(o) {}

  int run() {
    link_ = connect_to_node0(o_.master_addr, o_.master_port, meeting_time(o_), node_silence(o_),
                             [] { return interrupted != 0; });
    link_->send("hello " + std::to_string(o_.node_rank) + " " + std::to_string(o_.nnodes) + " " +
                std::to_string(o_.nprocs));
    for (;;) {
      // Node 0 says start (again), or that the job is over.
      std::vector<std::string> order = next_order();
      if (interrupted) return 128 + interrupted;
      if (order.empty()) {
        say("lost node 0's launcher (" + link_->why_lost() + ")");
        return 1;
      }
      if (order[0] == "exit") return exit_code(order[1]);
      if (order[0] == "refused:") throw std::runtime_error("brigade launch: node 0 " + join(order));
      if (std::optional<int> code = run_once(to_int(order[1]), to_int(order[2]))) return *code;
    }
  }

 private:
  // One run of this node's ranks; returns the launcher's exit code when it should exit now, or
  // nothing to wait for node 0's next order.
  std::optional<int> run_once(int restart, int store_port) {
    Rendezvous rendezvous;
    prepare(rendezvous, o_, store_port);
    std::unique_ptr<RankGroup> ranks = start_ranks(o_, restart, rendezvous);
    // Which came first decides what happens after: a failure here (reported to node 0), or node 0's
    // order to stop (a failure elsewhere).
    enum class First { nothing, failed_here, stopped_by_node0 } first = First::nothing;
    int my_code = 0;
    std::optional<int> job_over;  // node 0's "exit <code>" while our ranks still ran
    for (bool done = false; !done;) {
      done = ranks->poll(50);
      if (!ranks->failure().empty() && my_code == 0) {
        my_code = ranks->failure_code();
        if (first == First::nothing) first = First::failed_here;
        link_->send("failed " + std::to_string(my_code) + " 1 " + ranks->failure());
      }
      if (interrupted && my_code == 0) {
        my_code = 128 + interrupted;
        if (first == First::nothing) first = First::failed_here;
        ranks->stop(std::string("interrupted (") + strsignal(interrupted) + "); stopping the ranks");
        link_->send("failed " + std::to_string(my_code) + " 0 node " + std::to_string(o_.node_rank) +
                    " was interrupted");
      }
      while (std::optional<std::string> line = link_->next_line()) {
        auto w = words(*line);
        if (!w.empty() && w[0] == "stop") {
          if (first == First::nothing) first = First::stopped_by_node0;
          ranks->stop(rest_after(*line, 1) + "; stopping this node's ranks");
        } else if (w.size() == 2 && w[0] == "exit") {  // the job is over; our ranks are being stopped anyway
          job_over = exit_code(w[1]);
          ranks->stop("node 0 ended the job; stopping this node's ranks");
        }
      }
      if (link_->lost() && !ranks->stopping())
        ranks->stop("lost node 0's launcher (" + link_->why_lost() + "); stopping this node's ranks");
    }
    if (job_over) return job_over;
    if (interrupted) return 128 + interrupted;
    if (link_->lost()) return my_code != 0 ? my_code : 1;
    link_->send("finished " + std::to_string(my_code));
    // No restart can follow a failure that started here once they are used up: node 0 ends the job
    // without waiting for this node, and so may this node without waiting for node 0's word (which a
    // broken network would hold up until the silence limit).
    if (first == First::failed_here && restart >= o_.max_restarts) return my_code;
    return std::nullopt;
  }

  // The next "start <restart> <port>", "exit <code>" or "refused: ..." from node 0; empty when the
  // link is lost (node 0's silence limit bounds the wait) or this launcher is interrupted. Other
  // lines (a "stop" for a run that is already over here) are passed over.
  std::vector<std::string> next_order() {
    while (!interrupted) {
      while (std::optional<std::string> line = link_->next_line()) {
        auto w = words(*line);
        if ((w.size() == 3 && w[0] == "start") || (w.size() == 2 && w[0] == "exit") ||
            (!w.empty() && w[0] == "refused:"))
          return w;
      }
      if (link_->lost()) break;
      ::poll(nullptr, 0, 20);
    }
    return {};
  }

  // An exit code node 0 sent; a malformed one is a failure, never 0.
  static int exit_code(const std::string& text) {
    const int code = to_int(text);
    return code >= 0 ? code : 1;
  }

  static std::string join(const std::vector<std::string>& w) {
    std::string s;
    for (const std::string& word : w) s += (s.empty() ? "" : " ") + word;
    return s;
  }

  const LaunchOptions& o_;
  std::unique_ptr<NodeLink> link_;
};

}  // namespace

int run_job(const LaunchOptions& o) {
  SignalGuard signals;
  if (o.node_rank == 0) return Coordinator(o).run();
  return Follower(o).run();
}

}  // namespace brigade::launch
