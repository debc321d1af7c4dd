#include "backends/zookeeper/zk_transport.h"

#include "absl/strings/str_cat.h"

namespace lockd::zk {

bool IsTransient(int rc) {
  switch (rc) {
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT:
    case ZCLOSING:
    case ZSESSIONEXPIRED:
    case ZSESSIONMOVED:
    case ZINVALIDSTATE:
    case ZTHROTTLEDOP:
    case ZNOTREADONLY:
      return true;
    default:
      return false;
  }
}

int MultiRc(const Result& r) {
  for (int rc : r.multi) {
    if (rc != ZOK && rc != ZRUNTIMEINCONSISTENCY) return rc;
  }
  return r.rc;
}

absl::Status ZkError(absl::string_view context, int rc) {
  if (rc == ZOK) return absl::OkStatus();
  if (IsTransient(rc)) {
    return absl::UnavailableError(
        absl::StrCat("ZooKeeper unavailable during ", context, ": ", zerror(rc), " (", rc, ")"));
  }
  if (rc == ZNOAUTH || rc == ZAUTHFAILED) {
    return absl::UnauthenticatedError(
        absl::StrCat("ZooKeeper refused access during ", context, ": ", zerror(rc), " (", rc,
                     "); check zookeeper.auth_file and the ACLs under zookeeper.root"));
  }
  return absl::InternalError(
      absl::StrCat("unexpected ZooKeeper reply during ", context, ": ", zerror(rc), " (", rc, ")"));
}

absl::string_view SessionStateName(SessionState s) {
  switch (s) {
    case SessionState::kConnecting:
      return "connecting";
    case SessionState::kConnected:
      return "connected";
    case SessionState::kExpired:
      return "expired";
    case SessionState::kAuthFailed:
      return "authentication failed";
  }
  return "?";
}

Op Op::Create(std::string path, std::string data, int mode, Done done) {
  Op op;
  op.kind = Kind::kCreate;
  op.path = std::move(path);
  op.data = std::move(data);
  op.create_mode = mode;
  op.done = std::move(done);
  return op;
}

Op Op::Delete(std::string path, int version, Done done) {
  Op op;
  op.kind = Kind::kDelete;
  op.path = std::move(path);
  op.version = version;
  op.done = std::move(done);
  return op;
}

Op Op::Get(std::string path, Done done, uint64_t watch_id) {
  Op op;
  op.kind = Kind::kGet;
  op.path = std::move(path);
  op.watch_id = watch_id;
  op.done = std::move(done);
  return op;
}

Op Op::Set(std::string path, std::string data, int version, Done done) {
  Op op;
  op.kind = Kind::kSet;
  op.path = std::move(path);
  op.data = std::move(data);
  op.version = version;
  op.done = std::move(done);
  return op;
}

Op Op::Children(std::string path, Done done) {
  Op op;
  op.kind = Kind::kChildren;
  op.path = std::move(path);
  op.done = std::move(done);
  return op;
}

Op Op::Check(std::string path, int version) {
  Op op;
  op.kind = Kind::kCheck;
  op.path = std::move(path);
  op.version = version;
  return op;
}

Op Op::Multi(std::vector<Op> ops, Done done) {
  Op op;
  op.kind = Kind::kMulti;
  op.ops = std::move(ops);
  op.done = std::move(done);
  return op;
}

Op Op::Sync(std::string path, Done done) {
  Op op;
  op.kind = Kind::kSync;
  op.path = std::move(path);
  op.done = std::move(done);
  return op;
}

}  // namespace lockd::zk
