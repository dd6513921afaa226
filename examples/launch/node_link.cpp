#include "launch/node_link.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "comm/socket.h"

namespace brigade::launch {

using Clock = std::chrono::steady_clock;

namespace {

constexpr Milliseconds kHeartbeat{1000};
constexpr size_t kMaxLine = 4096;  // the protocol's lines are short; anything longer is not a launcher

std::string seconds_text(Milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", double(ms.count()) / 1000);
  return text;
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

NodeLink::NodeLink(int fd, std::string peer, Milliseconds silence)
    : fd_(fd), peer_(std::move(peer)), silence_(silence), last_heard_(Clock::now()), last_sent_(Clock::now()) {
  set_nonblocking(fd_);
  int on = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

NodeLink::~NodeLink() { close(fd_); }

void NodeLink::lose(const std::string& why) {
  if (why_lost_.empty()) why_lost_ = why;
}

void NodeLink::send(const std::string& line) {
  if (lost()) return;
  std::string text = line + "\n";
  // A few bytes into an empty or nearly empty socket buffer: a short write means the other side
  // stopped reading long ago, which the silence check reports anyway.
  ssize_t n = ::send(fd_, text.data(), text.size(), MSG_NOSIGNAL);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) lose(std::string("send: ") + strerror(errno));
  last_sent_ = Clock::now();
}

std::vector<std::string> NodeLink::receive() {
  std::vector<std::string> lines;
  if (lost()) return lines;
  char buffer[4096];
  for (;;) {
    ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
    if (n > 0) {
      last_heard_ = Clock::now();
      partial_.append(buffer, size_t(n));
      continue;
    }
    if (n == 0) lose("the connection was closed");
    else if (errno == EINTR) continue;
    else if (errno != EAGAIN && errno != EWOULDBLOCK) lose(std::string("recv: ") + strerror(errno));
    break;
  }
  for (size_t end; (end = partial_.find('\n')) != std::string::npos;) {
    std::string line = partial_.substr(0, end);
    partial_.erase(0, end + 1);
    if (line != "ping") lines.push_back(line);
  }
  if (partial_.size() > kMaxLine) lose("it sent a line longer than " + std::to_string(kMaxLine) + " bytes");
  const auto now = Clock::now();
  if (!lost() && now - last_heard_ > silence_)
    lose("nothing heard for " + seconds_text(silence_) + " (host down or network unreachable?)");
  if (!lost() && now - last_sent_ >= kHeartbeat) send("ping");
  return lines;
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
                                           Milliseconds silence) {
  const auto deadline = Clock::now() + within;
  auto pause = Milliseconds(50);
  for (;;) {
    auto left = std::chrono::duration_cast<Milliseconds>(deadline - Clock::now());
    int fd = comm::connect_within(host, port, left);
    if (fd >= 0) return std::make_unique<NodeLink>(fd, host, silence);
    if (Clock::now() >= deadline)
      throw std::runtime_error("brigade launch: could not reach node 0's launcher at " + host + ":" +
                               std::to_string(port) + " within " + seconds_text(within) +
                               " (is it running, with this --master-addr and --master-port?)");
    std::this_thread::sleep_for(std::min(pause, std::max(left, Milliseconds(1))));
    pause = std::min(pause * 2, Milliseconds(500));
  }
}

}  // namespace brigade::launch
