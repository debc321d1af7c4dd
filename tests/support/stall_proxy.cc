#include "tests/support/stall_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace lockd::testing {

absl::StatusOr<std::unique_ptr<StallProxy>> StallProxy::Start(int upstream_port) {
  auto p = std::unique_ptr<StallProxy>(new StallProxy(upstream_port));
  p->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof(addr);
  if (p->listen_fd_ < 0 ||
      ::bind(p->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(p->listen_fd_, 64) != 0 ||
      ::getsockname(p->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      ::pipe2(p->wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("proxy setup: ", ::strerror(errno)));
  }
  p->port_ = ntohs(addr.sin_port);
  p->thread_ = std::thread([raw = p.get()] { raw->Loop(); });
  return p;
}

StallProxy::~StallProxy() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  for (Conn& c : conns_) CloseConn(c);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_[0] >= 0) ::close(wake_[0]);
  if (wake_[1] >= 0) ::close(wake_[1]);
}

std::string StallProxy::address() const { return absl::StrCat("127.0.0.1:", port_); }

void StallProxy::HoldReplies(bool hold) {
  {
    absl::MutexLock l(&mu_);
    hold_replies_ = hold;
    if (!hold) held_below_ = 0;
  }
  Wake();
}

void StallProxy::HoldRepliesOnOpenConnections() {
  {
    absl::MutexLock l(&mu_);
    held_below_ = next_conn_id_.load();
  }
  Wake();
}

void StallProxy::HoldRequests(bool hold) {
  {
    absl::MutexLock l(&mu_);
    hold_requests_ = hold;
  }
  Wake();
}

void StallProxy::Hold(bool hold) {
  {
    absl::MutexLock l(&mu_);
    hold_requests_ = hold;
    hold_replies_ = hold;
    if (!hold) held_below_ = 0;
  }
  Wake();
}

bool StallProxy::WaitForPendingRequestBytes(size_t bytes, absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (pending_request_bytes() < bytes) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

bool StallProxy::WaitUntilRequestsDelivered(absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (pending_request_bytes() > 0) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

void StallProxy::CountPending() {
  size_t pending = 0;
  for (const Conn& c : conns_) pending += c.to_upstream.size();
  pending_request_bytes_.store(pending);
}

void StallProxy::CutConnections() {
  {
    absl::MutexLock l(&mu_);
    cut_ = true;
  }
  Wake();
  // Wait until the loop has done it, so the caller can rely on it.
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(
      +[](bool* cut) { return !*cut; }, &cut_));
}

sockaddr_in StallProxy::Loopback(int port) {
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

void StallProxy::Wake() {
  char b = 0;
  ssize_t unused = ::write(wake_[1], &b, 1);
  (void)unused;
}

void StallProxy::CloseConn(Conn& c) {
  if (c.client >= 0) ::close(c.client);
  if (c.upstream >= 0) ::close(c.upstream);
  c.client = c.upstream = -1;
}

// Reads what `fd` has into `buf`; false on EOF (*eof set) or error.
bool StallProxy::ReadInto(int fd, std::string* buf, bool* eof) {
  char chunk[16384];
  while (true) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n > 0) {
      buf->append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      *eof = true;
      return false;
    }
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

// Writes as much of `buf` as `fd` takes; false on error.
bool StallProxy::WriteFrom(int fd, std::string* buf) {
  while (!buf->empty()) {
    ssize_t n = ::send(fd, buf->data(), buf->size(), MSG_NOSIGNAL);
    if (n > 0) {
      buf->erase(0, static_cast<size_t>(n));
      continue;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
  }
  return true;
}

void StallProxy::Accept() {
  while (true) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    int up = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = Loopback(upstream_port_);
    if (up < 0 || ::connect(up, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      if (up >= 0) ::close(up);
      ::close(fd);
      continue;
    }
    ::fcntl(up, F_SETFL, ::fcntl(up, F_GETFL) | O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Conn c;
    c.id = next_conn_id_.fetch_add(1);
    c.client = fd;
    c.upstream = up;
    conns_.push_back(std::move(c));
  }
}

void StallProxy::Loop() {
  while (true) {
    bool hold_replies, hold_requests;
    uint64_t held_below;
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
      if (cut_) {
        for (Conn& c : conns_) CloseConn(c);
        conns_.clear();
        cut_ = false;
      }
      hold_replies = hold_replies_;
      hold_requests = hold_requests_;
      held_below = held_below_;
    }
    auto replies_held = [&](const Conn& c) { return hold_replies || c.id < held_below; };
    // Forward what may go now; drop connections that failed.
    for (Conn& c : conns_) {
      if (c.client < 0) continue;
      if ((!hold_requests && !WriteFrom(c.upstream, &c.to_upstream)) ||
          (!c.client_closed && !replies_held(c) && !WriteFrom(c.client, &c.to_client))) {
        CloseConn(c);
      } else if (c.client_closed && !hold_requests && c.to_upstream.empty() && !c.upstream_shut) {
        // All the client sent is delivered: now its FIN. The connection
        // ends when the upstream closes its side.
        ::shutdown(c.upstream, SHUT_WR);
        c.upstream_shut = true;
      }
    }
    conns_.erase(
        std::remove_if(conns_.begin(), conns_.end(), [](const Conn& c) { return c.client < 0; }),
        conns_.end());
    CountPending();
    std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Conn& c : conns_) {
      short to_client = !replies_held(c) && !c.to_client.empty() ? POLLOUT : 0;
      short to_upstream = !hold_requests && !c.to_upstream.empty() ? POLLOUT : 0;
      // A closed client is not polled (a negative fd is skipped).
      fds.push_back({c.client_closed ? -1 : c.client, static_cast<short>(POLLIN | to_client), 0});
      fds.push_back({c.upstream, static_cast<short>(POLLIN | to_upstream), 0});
    }
    if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) {
      char buf[64];
      while (::read(wake_[0], buf, sizeof(buf)) > 0) {
      }
    }
    if (fds[1].revents != 0) Accept();
    for (size_t i = 0; i + 2 < fds.size() && i / 2 < conns_.size(); i += 2) {
      Conn& c = conns_[i / 2];
      // Bytes are always read (and kept while held), so a held direction
      // looks to the sender like a slow network, not a full one.
      if ((fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        bool eof = false;
        if (!ReadInto(c.client, &c.to_upstream, &eof)) {
          if (!eof) {  // reset: the client's kernel dropped what it had
            CloseConn(c);
            continue;
          }
          // A client that closes its socket while its bytes are held has
          // them delivered all the same, as its kernel would once the
          // partition heals.
          c.client_closed = true;
          c.to_client.clear();
        }
      }
      if ((fds[i + 3].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        bool eof = false;
        if (!ReadInto(c.upstream, &c.to_client, &eof)) {
          CloseConn(c);
          continue;
        }
        if (c.client_closed) c.to_client.clear();
      }
    }
    CountPending();
  }
}

}  // namespace lockd::testing
