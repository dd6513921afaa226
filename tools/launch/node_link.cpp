#include "launch/node_link.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "comm/socket.h"

namespace brigade::launch {

using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMaxLine = 4096;         // the protocol's lines are short; anything longer is not a launcher
constexpr size_t kMaxOutgoing = 1 << 20;  // a peer that reads nothing for this long is gone

std::string seconds_text(Milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", double(ms.count()) / 1000);
  return text;
}

}  // namespace

NodeLink::NodeLink(int fd, std::string peer, Milliseconds silence)
    : fd_(fd), peer_(std::move(peer)), silence_(silence), last_heard_(Clock::now()) {
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
  heartbeat_ = std::thread([this] { beat(); });
}

NodeLink::~NodeLink() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
    flush_locked();  // a last "exit 3" still goes out if the socket takes it
  }
  closing_cv_.notify_all();
  heartbeat_.join();
  close(fd_);
}

void NodeLink::beat() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!closing_) {
    if (why_lost_.empty()) {
      outgoing_ += "ping\n";
      flush_locked();
    }
    closing_cv_.wait_for(lock, kHeartbeat, [&] { return closing_; });
  }
}

void NodeLink::lose_locked(const std::string& why) {
  if (why_lost_.empty()) why_lost_ = why;
}

bool NodeLink::lost() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !why_lost_.empty();
}

std::string NodeLink::why_lost() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return why_lost_;
}

void NodeLink::send(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!why_lost_.empty()) return;
  outgoing_ += line + "\n";
  flush_locked();
}

void NodeLink::flush_locked() {
  while (!outgoing_.empty() && why_lost_.empty()) {
    ssize_t n = ::send(fd_, outgoing_.data(), outgoing_.size(), MSG_NOSIGNAL);
    if (n > 0) {
      outgoing_.erase(0, size_t(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (outgoing_.size() > kMaxOutgoing) lose_locked("it stopped reading (" + std::to_string(outgoing_.size()) + " bytes queued)");
      return;  // the rest goes out on the next send, heartbeat or read
    } else {
      lose_locked(std::string("send: ") + strerror(errno));
    }
  }
}

std::optional<std::string> NodeLink::next_line() {
  if (incoming_.empty() && !lost()) {
    char buffer[4096];
    std::string error;
    for (;;) {
      ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
      if (n > 0) {
        last_heard_ = Clock::now();
        partial_.append(buffer, size_t(n));
        continue;
      }
      if (n == 0) error = "the connection was closed";
      else if (errno == EINTR) continue;
      else if (errno != EAGAIN && errno != EWOULDBLOCK) error = std::string("recv: ") + strerror(errno);
      break;
    }
    for (size_t end; (end = partial_.find('\n')) != std::string::npos;) {
      std::string line = partial_.substr(0, end);
      partial_.erase(0, end + 1);
      if (line != "ping") incoming_.push_back(line);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    flush_locked();
    if (!error.empty()) lose_locked(error);
    if (partial_.size() > kMaxLine) lose_locked("it sent a line longer than " + std::to_string(kMaxLine) + " bytes");
    // Silence is judged after reading everything that arrived: heartbeats that queued up while this
    // loop was busy elsewhere count.
    if (Clock::now() - last_heard_ > silence_)
      lose_locked("nothing heard for " + seconds_text(silence_) + ": host down or network unreachable?");
  }
  // Lines that arrived before the link was lost are still delivered ("failed ..." then a close).
  if (incoming_.empty()) return std::nullopt;
  std::string line = std::move(incoming_.front());
  incoming_.pop_front();
  return line;
}

int listen_for_nodes(int port) {
  const int fd = comm::listen_on_any(port, 256, /*nonblocking=*/true);
  if (fd < 0)
    throw std::runtime_error("brigade launch: node 0 cannot listen on --master-port " + std::to_string(port) + ": " +
                             strerror(errno) + " (is another job using it?)");
  return fd;
}

std::unique_ptr<NodeLink> accept_node(int listen_fd, Milliseconds silence) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
  if (fd < 0) return nullptr;
  return std::make_unique<NodeLink>(fd, comm::address_text(reinterpret_cast<sockaddr*>(&addr)), silence);
}

std::unique_ptr<NodeLink> connect_to_node0(const std::string& host, int port, Milliseconds within,
                                           Milliseconds silence, const std::function<bool()>& give_up) {
  const auto deadline = Clock::now() + within;
  auto pause = Milliseconds(50);
  for (;;) {
    // Short attempts, so an interrupt is noticed within a second even while a host does not answer.
    auto left = std::chrono::duration_cast<Milliseconds>(deadline - Clock::now());
    int fd = comm::connect_within(host, port, std::min(left, Milliseconds(1000)));
    if (fd >= 0) return std::make_unique<NodeLink>(fd, host, silence);
    if (give_up()) throw std::runtime_error("brigade launch: interrupted while connecting to node 0's launcher");
    if (Clock::now() >= deadline)
      throw std::runtime_error("brigade launch: could not reach node 0's launcher at " + host + ":" +
                               std::to_string(port) + " within " + seconds_text(within) +
                               " (is it running, with this --master-addr and --master-port?)");
    std::this_thread::sleep_for(std::min(pause, std::max(left, Milliseconds(1))));
    pause = std::min(pause * 2, Milliseconds(500));
  }
}

}  // namespace brigade::launch
