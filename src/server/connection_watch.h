// Detects a client that went away while its request is still generating.
//
// cpp-httplib 0.11 gives handlers no way to see the connection (DataSink::is_writable only checks
// that the send buffer has room, which stays true for a peer that has closed). So the handler
// finds its own socket once, by matching the request's peer and local address against this
// process's open sockets, and then polls it for POLLRDHUP. The fd cannot be reused while the
// handler runs: httplib closes it only after the handler and its content provider return.
#pragma once
#include <string>

namespace striker::server {

// Shuts the reading side of every connection this process accepted on `local_port`: an HTTP
// thread waiting on a kept-alive connection for its next request (up to the keep-alive timeout)
// sees end-of-file and closes it at once, while a response still being written goes out whole.
// For the end of a drain, as uvicorn closes idle connections on shutdown.
void shutdown_connections(int local_port);

class ConnectionWatch {
 public:
  ConnectionWatch(const std::string& remote_addr, int remote_port, int local_port);
  // True once the peer has closed or reset the connection. Never blocks.
  bool peer_closed() const;
  bool found() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace striker::server
