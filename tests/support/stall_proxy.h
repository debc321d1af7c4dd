// Test support: a TCP proxy on a free loopback port in front of one upstream
// (a lockd, or a backend server a lockd talks to), whose test can hold back
// the bytes of either direction or both and deliver them later, in order,
// without resetting any connection: a partition whose bytes TCP
// retransmits once it heals. As TCP does, the bytes a client sent before it
// closed its socket are delivered too (then the close). Two uses:
//  * Replies held: a client's Acquire reaches lockd and is granted, the
//    reply is written to the socket (so lockd counts it as delivered and
//    keeps the hold), yet the client hears nothing: the "outcome unknown"
//    case that the clients' undo must handle, made exact instead of
//    timing-dependent.
//  * Requests held: a request the client sent reaches lockd only when the
//    test lets it, after the client went on elsewhere (a late Release).
//
// Thread-safe: the controls may be called from any thread; one internal
// thread moves the bytes (poll() over every socket and a wake-up pipe).

#ifndef LOCKD_TESTS_SUPPORT_STALL_PROXY_H_
#define LOCKD_TESTS_SUPPORT_STALL_PROXY_H_

#include <netinet/in.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lockd::testing {

class StallProxy {
 public:
  // Listens on 127.0.0.1:<ephemeral>; each accepted connection is relayed to
  // 127.0.0.1:upstream_port. kInternal if a socket call fails.
  static absl::StatusOr<std::unique_ptr<StallProxy>> Start(int upstream_port);
  // Closes every connection (dropping what was held back).
  ~StallProxy();

  StallProxy(const StallProxy&) = delete;
  StallProxy& operator=(const StallProxy&) = delete;

  int port() const { return port_; }
  std::string address() const;  // "127.0.0.1:<port>"

  // While true, bytes from the upstream are read and kept, not forwarded
  // (and forwarded, in order, once it is false again).
  void HoldReplies(bool hold);
  // The same, but only for the connections open now: a client that gives
  // up on a connection whose replies stopped (keepalive) and opens another
  // is served normally there. HoldReplies(false) ends it too.
  void HoldRepliesOnOpenConnections();
  // The same for the bytes from the clients.
  void HoldRequests(bool hold);
  // Both directions: the partition starts (true) or heals (false; what was
  // held is delivered in order, the connections go on).
  void Hold(bool hold);

  // The bytes read from the clients and not yet delivered to the upstream
  // (held, or on their way), every connection together, as of the proxy's
  // last pass.
  size_t pending_request_bytes() const { return pending_request_bytes_.load(); }
  // Waits up to `timeout` until pending_request_bytes() is at least `bytes`
  // (a request the test sent is held); false on timeout.
  bool WaitForPendingRequestBytes(size_t bytes, absl::Duration timeout) const;
  // Waits up to `timeout` until every byte read from the clients is
  // delivered (pending_request_bytes() is 0); false on timeout.
  bool WaitUntilRequestsDelivered(absl::Duration timeout) const;

  // Closes every current connection, dropping whatever was held back (the
  // clients see their calls fail with UNAVAILABLE; the upstream sees the
  // connection end). New connections are accepted as before. Returns once
  // it is done.
  void CutConnections();

 private:
  struct Conn {
    uint64_t id = 0;  // in accept order
    int client = -1;
    int upstream = -1;
    std::string to_upstream;  // read from the client, not yet written
    std::string to_client;    // read from the upstream, not yet written
    // The client closed its end (EOF): what it sent is still delivered,
    // then the upstream gets a FIN (upstream_shut).
    bool client_closed = false;
    bool upstream_shut = false;
  };

  explicit StallProxy(int upstream_port) : upstream_port_(upstream_port) {}

  static sockaddr_in Loopback(int port);
  void Wake();
  static void CloseConn(Conn& c);
  static bool ReadInto(int fd, std::string* buf, bool* eof);
  static bool WriteFrom(int fd, std::string* buf);
  void Accept();
  void Loop();
  void CountPending();

  const int upstream_port_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::thread thread_;
  std::vector<Conn> conns_;  // only the loop thread touches it (and ~StallProxy after join)
  std::atomic<uint64_t> next_conn_id_{1};
  std::atomic<size_t> pending_request_bytes_{0};

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool cut_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_replies_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_requests_ ABSL_GUARDED_BY(mu_) = false;
  // Replies of connections with a smaller id are held.
  uint64_t held_below_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_STALL_PROXY_H_
