#include "server/connection_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <cstdlib>
#include <cstring>

namespace striker::server {
namespace {

bool endpoint_matches(const sockaddr_storage& addr, socklen_t len, const std::string& host, int port, bool check_host) {
  int p = -1;
  if (addr.ss_family == AF_INET) {
    p = ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  } else if (addr.ss_family == AF_INET6) {
    p = ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  } else {
    return false;
  }
  if (p != port) return false;
  if (!check_host) return true;
  char buf[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, buf, sizeof(buf), nullptr, 0, NI_NUMERICHOST) != 0) {
    return false;
  }
  return host == buf;
}

// Calls `fn(fd, peer, peer_len, local, local_len)` for each connected socket of this process
// until it returns true.
template <typename Fn>
void for_each_connected_socket(Fn&& fn) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st {};
    if (fstat(int(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage peer{}, local{};
    socklen_t plen = sizeof(peer), llen = sizeof(local);
    if (getpeername(int(fd), reinterpret_cast<sockaddr*>(&peer), &plen) != 0) continue;
    if (getsockname(int(fd), reinterpret_cast<sockaddr*>(&local), &llen) != 0) continue;
    if (fn(int(fd), peer, plen, local, llen)) break;
  }
  closedir(dir);
}

}  // namespace

void shutdown_connections(int local_port) {
  for_each_connected_socket([&](int fd, const sockaddr_storage&, socklen_t, const sockaddr_storage& local, socklen_t llen) {
    if (endpoint_matches(local, llen, "", local_port, false)) shutdown(fd, SHUT_RD);
    return false;
  });
}

ConnectionWatch::ConnectionWatch(const std::string& remote_addr, int remote_port, int local_port) {
  if (remote_port < 0 || local_port < 0) return;
  for_each_connected_socket([&](int fd, const sockaddr_storage& peer, socklen_t plen, const sockaddr_storage& local,
                                socklen_t llen) {
    if (endpoint_matches(peer, plen, remote_addr, remote_port, true) && endpoint_matches(local, llen, "", local_port, false)) {
      fd_ = fd;
      return true;
    }
    return false;
  });
}

bool ConnectionWatch::peer_closed() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace striker::server
