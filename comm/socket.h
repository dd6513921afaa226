// Small pieces of socket plumbing shared by the TCP store (comm/tcp_store.cpp), address choice
// (comm/address.cpp) and the launchers' links (tools/launch/node_link.cpp). Header-only and plain
// POSIX, so the launcher, which does not link libbrigade, can use it too.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>

namespace brigade::comm {

// One attempt to open a TCP connection to host:port, waiting at most `within`; the connected
// socket (blocking, TCP_NODELAY, close-on-exec), or -1. A blocking connect() to a host that does
// not answer — a link that is down, a firewall that drops — would wait minutes of SYN retries.
inline int connect_within(const std::string& host, int port, std::chrono::milliseconds within) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    bool connected = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    if (!connected && errno == EINPROGRESS) {
      pollfd pfd{fd, POLLOUT, 0};
      int error = 0;
      socklen_t len = sizeof error;
      connected = poll(&pfd, 1, int(std::max<int64_t>(1, within.count()))) == 1 &&
                  getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0;
    }
    if (!connected) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd >= 0) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  }
  return fd;
}

// A TCP socket listening on `port` of every IPv4 interface (close-on-exec, address reusable at
// once after a previous run); -1 with errno set when the port is taken or the call fails.
inline int listen_on_any(int port, int backlog, bool nonblocking = false) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) return -1;
  int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(uint16_t(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, backlog) != 0) {
    const int error = errno;
    close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

// A TCP port nobody listens on right now, on any interface (the kernel's pick), or -1. Another
// process could take it before the caller binds it; that race is rare and fails loudly there.
inline int free_port() {
  const int fd = listen_on_any(0, 1);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  const int port = getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 ? ntohs(addr.sin_port) : -1;
  close(fd);
  return port;
}

// "10.0.0.2", "::1": an IPv4 or IPv6 socket address as text; empty for other families.
inline std::string address_text(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
  else if (addr->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text, sizeof text);
  return text;
}

}  // namespace brigade::comm
