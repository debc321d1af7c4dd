// The Redis client under the redis backend, part three: the one pub/sub
// connection that carries release notifications, read by a thread owned here.
//
// Internal to backends/redis; the backend's contract is redis_backend.h.

#ifndef LOCKD_BACKENDS_REDIS_SUBSCRIBER_H_
#define LOCKD_BACKENDS_REDIS_SUBSCRIBER_H_

#include <hiredis/hiredis.h>

#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/redis/redis_client.h"

namespace lockd::redis {

// One connection in subscribe mode, driven by one thread with poll(2), for
// release notifications. Callers declare which channels they want; the
// subscriber keeps them subscribed across reconnects and reports when each
// subscription is in force.
//
// Sharded (Redis Cluster, Redis >= 7): SSUBSCRIBE/SUNSUBSCRIBE, one channel
// per command, on one cluster node. The node may refuse a channel (-MOVED:
// its slot is elsewhere) or drop one (a `sunsubscribe` push when the slot
// leaves the node); either is reported by OnChannelLost and the connection
// stays up. The channel stays wanted but not subscribed: the caller moves it.
//
// Thread-safe: the channel table is guarded by one mutex; the connection is
// touched only by the thread. Listener calls are made on that thread with no
// lock held.
class Subscriber {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // `channel` is now subscribed (after Subscribe(), and again after every
    // reconnect): any message published to it from now on will be delivered.
    virtual void OnSubscribed(const std::string& channel) = 0;
    // `message` was published to `channel`, which is wanted and subscribed.
    virtual void OnMessage(const std::string& channel, absl::string_view message) = 0;
    // The connection is gone: no subscription is in force until the next
    // OnSubscribed for it.
    virtual void OnConnectionLost(const absl::Status& why) = 0;
    // Sharded only: `channel` is wanted but the server refused or dropped its
    // subscription (`why`); nothing is delivered for it until it is
    // unsubscribed and subscribed again.
    virtual void OnChannelLost(const std::string& channel, absl::string_view why) {}
  };

  // `listener` must outlive the subscriber. Call Start() to connect.
  Subscriber(ConnectionOptions options, Listener* listener, absl::Duration backoff_min,
             absl::Duration backoff_max, absl::Duration ping_interval, bool sharded = false);
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Starts the thread, which connects (and reconnects) on its own.
  absl::Status Start();

  // Wants `channel` (idempotent). OnSubscribed follows once it is in force.
  void Subscribe(const std::string& channel);
  // No longer wants `channel` (idempotent); no OnSubscribed/OnMessage for it
  // is made after this returns, unless it is wanted again.
  void Unsubscribe(const std::string& channel);

  // Makes the connection drop at once and reconnect (sentinel mode: the
  // primary moved); OnConnectionLost follows. False (and no effect) if it is
  // not connected.
  bool ResetConnection();

  bool connected() const;
  absl::Status last_error() const;
  // Blocks until connected (true) or `timeout` passes.
  bool WaitConnected(absl::Duration timeout) const;

  // Closes the connection and joins the thread. Idempotent.
  void Stop();

 private:
  struct Channel {
    bool want = false;    // the listener wants it
    bool active = false;  // subscribed and confirmed, and still wanted
    int pending = 0;      // SUBSCRIBE/UNSUBSCRIBE sent, not yet confirmed
  };
  struct Op {
    bool subscribe;
    std::string channel;
  };

  void Run();
  // The connection to options_.addresses[address] is up: marks it so and
  // queues a SUBSCRIBE for every wanted channel.
  void Connected(size_t address, bool reconnected);
  // Runs the connection until it must be dropped (returns why) or the
  // subscriber stops (OK): sends queued (UN)SUBSCRIBEs, reads replies, PINGs
  // a silent connection.
  absl::Status Serve(redisContext* ctx);
  // Reads what arrived on `ctx` and handles every complete reply.
  absl::Status ReadReplies(redisContext* ctx);
  void Wake();
  // Waits up to `d` for a wake-up; false if stopping.
  bool Sleep(absl::Duration d);
  absl::Status Flush(redisContext* c);
  absl::Status HandleReply(const redisReply* r);
  // A confirmation of (un)subscribing `channel` arrived.
  void Confirmed(const std::string& channel);
  // Sharded: the server refused the oldest unanswered (UN)SUBSCRIBE, or
  // dropped `channel` on its own (`unsolicited`).
  void Lost(const std::string& channel, bool unsolicited, absl::string_view why);
  void Disconnected(const absl::Status& why);
  bool ConnectedOrStopped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ConnectionOptions options_;
  Listener* const listener_;
  const absl::Duration backoff_min_;
  const absl::Duration backoff_max_;
  const absl::Duration ping_interval_;
  const bool sharded_;
  int wake_fd_ = -1;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  bool reset_ ABSL_GUARDED_BY(mu_) = false;  // ResetConnection() was called
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Channel> channels_ ABSL_GUARDED_BY(mu_);
  std::vector<Op> ops_ ABSL_GUARDED_BY(mu_);
  bool ping_outstanding_ = false;  // thread only
  std::deque<Op> sent_;            // thread only; sharded: unanswered, in order
  std::thread thread_;
};

}  // namespace lockd::redis

#endif  // LOCKD_BACKENDS_REDIS_SUBSCRIBER_H_
