// The operations the ZooKeeper backend needs from a ZooKeeper session, as
// an interface (leveldb's Env idea): zk::Client implements it over the C
// client; tests implement it with an in-memory, scriptable fake. Also the
// vocabulary both share: Op, Result, SessionState and ZkError().
//
// A Transport's contract (what the backend relies on):
//   - one session at a time, counted by generation(); state changes are
//     reported to the StateFn given at construction, in order;
//   - Submit()ted operations of one session are answered in order, and a
//     read sent after a write sees that write;
//   - every submitted Op's callback runs exactly once: on the transport's
//     completion thread, or inline on the calling thread when the operation
//     fails before it is sent (not connected: ZCONNECTIONLOSS; closed:
//     ZCLOSING). So Submit() must not be called while holding a lock the
//     callback takes;
//   - a Get with a watch_id sets a data watch, reported once to the WatchFn
//     (node deleted or changed); session events are not watch events.
//
// Thread-safe: implementations must be.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_ZK_TRANSPORT_H_
#define LOCKD_BACKENDS_ZOOKEEPER_ZK_TRANSPORT_H_

#include <zookeeper/zookeeper.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lockd::zk {

// Translates a ZooKeeper return code into a Status whose message names the
// operation (`context`, which should include the lock). The one place where
// ZooKeeper codes become Status codes:
//   connection loss, operation timeout, closing, session expired/moved,
//   throttled, invalid handle state        -> kUnavailable
//   no auth, auth failed                   -> kUnauthenticated
//   anything else                          -> kInternal
absl::Status ZkError(absl::string_view context, int rc);

// True for the codes ZkError maps to kUnavailable.
bool IsTransient(int rc);

// The outcome of one operation.
struct Result {
  int rc = ZOK;
  struct Stat stat = {};              // create, get, set, children (the parent's)
  std::string value;                  // get: the data; create: the created path
  std::vector<std::string> children;  // children
  std::vector<int> multi;             // multi: each sub-operation's code
};

// The code that matters for a multi: its first failing sub-operation's (a
// failed multi reports ZOK for those before it and ZRUNTIMEINCONSISTENCY
// for those after), else `r.rc` (ZOK, or an error of the whole request such
// as ZCONNECTIONLOSS). For any other operation, `r.rc`.
int MultiRc(const Result& r);

using Done = absl::AnyInvocable<void(Result) &&>;

struct Op {
  enum class Kind { kCreate, kDelete, kGet, kSet, kChildren, kCheck, kMulti, kSync };

  Kind kind = Kind::kGet;
  std::string path;
  std::string data;       // create, set
  int version = -1;       // delete, set, check; -1 matches any version
  int create_mode = 0;    // create: ZOO_PERSISTENT, ZOO_EPHEMERAL_SEQUENTIAL, ...
  bool open_acl = false;  // create: world-accessible even with digest auth
  uint64_t watch_id = 0;  // get: if nonzero, also sets a data watch reported
                          // to the WatchFn with this id
  std::vector<Op> ops;    // multi: kDelete, kSet and kCheck sub-operations
  Done done;              // not used for sub-operations of a multi

  static Op Create(std::string path, std::string data, int mode, Done done);
  static Op Delete(std::string path, int version, Done done);
  static Op Get(std::string path, Done done, uint64_t watch_id = 0);
  static Op Set(std::string path, std::string data, int version, Done done);
  static Op Children(std::string path, Done done);
  static Op Check(std::string path, int version);  // multi only
  static Op Multi(std::vector<Op> ops, Done done);
  // Brings the server this session talks to up to date with the leader: a
  // read sent after it (in the same Submit or later) reflects every write
  // acknowledged to any session before the sync was sent. Not in a multi.
  static Op Sync(std::string path, Done done);
};

enum class SessionState {
  kConnecting,  // no connection; a session may or may not still exist
  kConnected,
  kExpired,     // the session is gone (its ephemeral nodes too); Reopen()
  kAuthFailed,  // the server refused the credentials; Reopen() to retry
};

absl::string_view SessionStateName(SessionState s);

// `generation` counts sessions (1 for the first); an event of an older
// generation is stale.
using StateFn = absl::AnyInvocable<void(SessionState state, uint64_t generation) const>;
// A watch set by a Get with watch_id fired for the node `path`; `type` is
// ZOO_DELETED_EVENT, ZOO_CHANGED_EVENT, ... Session events are not reported
// here.
using WatchFn = absl::AnyInvocable<void(uint64_t watch_id, int type, absl::string_view path) const>;

class Transport {
 public:
  virtual ~Transport() = default;

  // Starts the first session (connecting in the background; the StateFn
  // reports kConnected). kUnavailable if no host of the connect string can
  // be used now (none resolves, e.g. DNS records not created yet): nothing
  // was started, Reopen() tries again.
  virtual absl::Status Open() = 0;

  // Replaces the current session (if any) by a new one (after expiry,
  // refused credentials or a failed Open): the old session's pending
  // callbacks run with an error. Fails as Open(). May block; must not run on
  // the completion thread.
  virtual absl::Status Reopen() = 0;

  // Ends the session; every pending callback has run when it returns. Later
  // Submit()s fail with ZCLOSING. Idempotent. Must not run on the completion
  // thread.
  virtual void Close() = 0;

  // True while the session is connected.
  virtual bool connected() const = 0;
  // The current session's generation (0 before Open()).
  virtual uint64_t generation() const = 0;

  // Sends `ops` in order on the current session.
  virtual void Submit(std::vector<Op> ops) = 0;
  void Submit(Op op) {
    std::vector<Op> ops;
    ops.push_back(std::move(op));
    Submit(std::move(ops));
  }
};

// Makes the transport a backend runs on, given the callbacks it reports to.
using TransportFactory = absl::AnyInvocable<std::unique_ptr<Transport>(StateFn, WatchFn)>;

}  // namespace lockd::zk

#endif  // LOCKD_BACKENDS_ZOOKEEPER_ZK_TRANSPORT_H_
