#include "tests/support/redis_cluster.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace lockd::testing {
namespace {

constexpr absl::Duration kConnectTimeout = absl::Seconds(1);
constexpr absl::Duration kCommandTimeout = absl::Seconds(10);
constexpr absl::Duration kPollStep = absl::Milliseconds(50);
constexpr int kMigrateBatch = 100;

std::string Address(int port) { return absl::StrCat("127.0.0.1:", port); }

std::string Text(const redisReply* r) { return std::string(redis::ReplyText(r)); }

// One line of CLUSTER NODES: "<id> <ip:port@cport[,host]> <flags> <primary>
// <ping> <pong> <epoch> <link> <slot>...". Nodes still in handshake (no id
// agreed yet) are skipped.
bool ParseNodeLine(absl::string_view line, RedisCluster::Node* node) {
  std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (f.size() < 8) return false;
  std::vector<absl::string_view> flags = absl::StrSplit(f[2], ',');
  auto has = [&](absl::string_view flag) {
    return std::find(flags.begin(), flags.end(), flag) != flags.end();
  };
  if (has("handshake") || has("noaddr")) return false;
  absl::string_view addr = f[1].substr(0, f[1].find('@'));
  size_t colon = addr.rfind(':');
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(addr.substr(colon + 1), &node->port)) {
    return false;
  }
  node->id = std::string(f[0]);
  node->primary = has("master");
  node->failed = has("fail") || has("fail?");
  node->primary_id = f[3] == "-" ? "" : std::string(f[3]);
  for (size_t i = 8; i < f.size(); ++i) {
    if (absl::StartsWith(f[i], "[")) continue;  // a slot being imported or migrated
    std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(f[i], '-');
    int lo = 0, hi = 0;
    if (!absl::SimpleAtoi(range.first, &lo)) continue;
    if (range.second.empty()) {
      hi = lo;
    } else if (!absl::SimpleAtoi(range.second, &hi)) {
      continue;
    }
    node->slots.emplace_back(lo, hi);
  }
  std::sort(node->slots.begin(), node->slots.end());
  return true;
}

// What one node says about the cluster, for CheckConverged.
struct View {
  std::vector<RedisCluster::Node> nodes;
  // (first slot, last slot, primary's port), ascending.
  std::vector<std::tuple<int, int, int>> ranges;
};

}  // namespace

std::string RedisCluster::Node::address() const { return Address(port); }

bool RedisCluster::Node::Serves(int slot) const {
  for (const auto& [lo, hi] : slots) {
    if (slot >= lo && slot <= hi) return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<RedisCluster>> RedisCluster::Start(const Options& options,
                                                                  absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  std::unique_ptr<RedisCluster> c(new RedisCluster(options));
  if (c->dir_.path().empty()) return absl::InternalError("cannot create a temporary directory");
  absl::Status s = c->StartNodes(timeout);
  if (s.ok()) s = c->Create(deadline - absl::Now());
  if (s.ok()) s = c->WaitConverged(deadline - absl::Now());
  if (!s.ok()) return s;
  if (!WaitFor([&] { return (s = c->CheckTopology()).ok(); }, deadline - absl::Now(), kPollStep)) {
    return absl::UnavailableError(absl::StrCat("the cluster did not form: ", s.message()));
  }
  return c;
}

RedisCluster::~RedisCluster() {
  for (auto& s : servers_) s->Kill();
}

absl::Status RedisCluster::StartNodes(absl::Duration timeout) {
  if (options_.primaries < 3 || options_.replicas_per_primary < 0) {
    return absl::InvalidArgumentError("a cluster needs at least 3 primaries");
  }
  int n = options_.primaries * (1 + options_.replicas_per_primary);
  for (int i = 0; i < n; ++i) {
    // The cluster bus port is chosen here (the default, port + 10000, may be
    // taken or beyond 65535); if it is taken by the time the node binds it,
    // the node exits and is started again with another.
    absl::StatusOr<std::unique_ptr<RedisServer>> server = absl::UnknownError("not started");
    for (int attempt = 0; attempt < 3 && !server.ok(); ++attempt) {
      RedisServer::Options o;
      o.extra_args = {"--cluster-enabled", "yes", "--cluster-port", absl::StrCat(FreePort()),
                      "--cluster-config-file", "nodes.conf", "--cluster-node-timeout",
                      absl::StrCat(absl::ToInt64Milliseconds(options_.node_timeout)),
                      // A replica may take over however long its link was
                      // down: failovers must not depend on timing.
                      "--cluster-replica-validity-factor", "0",
                      // Replicas sync at once (by default a primary waits 5 s
                      // for more replicas to share one transfer).
                      "--repl-diskless-sync-delay", "0"};
      server = RedisServer::Start(std::move(o), timeout);
    }
    if (!server.ok()) return server.status();
    servers_.push_back(*std::move(server));
  }
  return absl::OkStatus();
}

absl::Status RedisCluster::Create(absl::Duration timeout) {
  std::string cli = FindExecutable({"redis-cli", "/usr/bin/redis-cli"});
  if (cli.empty()) return absl::NotFoundError("redis-cli is not installed");
  std::vector<std::string> argv = {cli, "--cluster", "create"};
  for (const auto& s : servers_) argv.push_back(s->address());
  argv.insert(argv.end(),
              {"--cluster-replicas", absl::StrCat(options_.replicas_per_primary), "--cluster-yes"});
  std::string log = absl::StrCat(dir_.path(), "/redis-cli-create.log");
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(argv, log);
  if (!p.ok()) return p.status();
  int status = (*p)->Wait(timeout);
  if (status != 0) {
    (*p)->Kill();
    return absl::UnavailableError(absl::StrCat("redis-cli --cluster create failed (wait status ",
                                               status, "); its output:\n", (*p)->Log()));
  }
  return absl::OkStatus();
}

std::string RedisCluster::SeedAddresses() const {
  std::vector<std::string> out;
  for (const auto& s : servers_) out.push_back(s->address());
  return absl::StrJoin(out, ",");
}

std::vector<int> RedisCluster::RunningPorts() const {
  std::vector<int> out;
  for (const auto& s : servers_) {
    if (s->running()) out.push_back(s->port());
  }
  return out;
}

absl::StatusOr<redis::ReplyPtr> RedisCluster::Command(int port,
                                                      const std::vector<std::string>& args) const {
  timeval connect_timeout = absl::ToTimeval(kConnectTimeout);
  redis::ContextPtr c(redisConnectWithTimeout("127.0.0.1", port, connect_timeout));
  if (c == nullptr || c->err != 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", Address(port), ": ",
                                               c != nullptr ? c->errstr : "out of memory"));
  }
  redisSetTimeout(c.get(), absl::ToTimeval(kCommandTimeout));
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  redis::ReplyPtr r(static_cast<redisReply*>(
      redisCommandArgv(c.get(), static_cast<int>(argv.size()), argv.data(), lens.data())));
  if (r == nullptr) {
    return absl::UnavailableError(
        absl::StrCat(args.empty() ? "" : args[0], " on ", Address(port), " failed: ", c->errstr));
  }
  return r;
}

absl::Status RedisCluster::CommandOk(int port, const std::vector<std::string>& args) const {
  absl::StatusOr<redis::ReplyPtr> r = Command(port, args);
  if (!r.ok()) return r.status();
  if ((*r)->type == REDIS_REPLY_STATUS && Text(r->get()) == "OK") return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat(absl::StrJoin(args, " "), " on ", Address(port), " answered: ", Text(r->get())));
}

absl::StatusOr<RedisCluster::Node> RedisCluster::NodeById(const std::string& id) const {
  absl::StatusOr<std::vector<Node>> nodes = Nodes();
  if (!nodes.ok()) return nodes.status();
  for (Node& n : *nodes) {
    if (n.id == id) return std::move(n);
  }
  return absl::NotFoundError(absl::StrCat("no node ", id));
}

absl::StatusOr<std::vector<RedisCluster::Node>> RedisCluster::NodesOf(int port) const {
  absl::StatusOr<redis::ReplyPtr> r = Command(port, {"CLUSTER", "NODES"});
  if (!r.ok()) return r.status();
  if ((*r)->type != REDIS_REPLY_STRING) {
    return absl::UnavailableError(absl::StrCat("CLUSTER NODES: ", Text(r->get())));
  }
  std::vector<Node> nodes;
  for (absl::string_view line : absl::StrSplit(Text(r->get()), '\n', absl::SkipEmpty())) {
    Node n;
    if (ParseNodeLine(line, &n)) nodes.push_back(std::move(n));
  }
  return nodes;
}

absl::StatusOr<std::vector<RedisCluster::Node>> RedisCluster::Nodes() const {
  absl::Status last = absl::UnavailableError("no node runs");
  for (int port : RunningPorts()) {
    absl::StatusOr<std::vector<Node>> nodes = NodesOf(port);
    if (nodes.ok()) return nodes;
    last = nodes.status();
  }
  return last;
}

absl::StatusOr<std::vector<RedisCluster::Node>> RedisCluster::Primaries() const {
  absl::StatusOr<std::vector<Node>> nodes = Nodes();
  if (!nodes.ok()) return nodes.status();
  std::vector<Node> out;
  for (Node& n : *nodes) {
    if (n.primary && !n.slots.empty()) out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end(),
            [](const Node& a, const Node& b) { return a.slots[0] < b.slots[0]; });
  return out;
}

absl::StatusOr<std::vector<RedisCluster::Node>> RedisCluster::ReplicasOf(
    const std::string& primary_id) const {
  absl::StatusOr<std::vector<Node>> nodes = Nodes();
  if (!nodes.ok()) return nodes.status();
  std::vector<Node> out;
  for (Node& n : *nodes) {
    if (!n.primary && !n.failed && n.primary_id == primary_id) out.push_back(std::move(n));
  }
  return out;
}

absl::StatusOr<RedisCluster::Node> RedisCluster::SlotOwner(int slot) const {
  absl::StatusOr<std::vector<Node>> primaries = Primaries();
  if (!primaries.ok()) return primaries.status();
  for (Node& p : *primaries) {
    if (p.Serves(slot)) return std::move(p);
  }
  return absl::NotFoundError(absl::StrCat("no primary serves slot ", slot));
}

absl::StatusOr<int> RedisCluster::KeySlot(const std::string& key) const {
  absl::Status last = absl::UnavailableError("no node runs");
  for (int port : RunningPorts()) {
    absl::StatusOr<redis::ReplyPtr> r = Command(port, {"CLUSTER", "KEYSLOT", key});
    if (r.ok() && (*r)->type == REDIS_REPLY_INTEGER) return static_cast<int>((*r)->integer);
    last = r.ok() ? absl::UnavailableError(Text(r->get())) : r.status();
  }
  return last;
}

absl::StatusOr<redis::ReplyPtr> RedisCluster::CommandForKey(
    const std::string& key, const std::vector<std::string>& args) const {
  absl::StatusOr<int> slot = KeySlot(key);
  if (!slot.ok()) return slot.status();
  absl::StatusOr<Node> owner = SlotOwner(*slot);
  if (!owner.ok()) return owner.status();
  return Command(owner->port, args);
}

absl::StatusOr<std::vector<std::string>> RedisCluster::Keys(int port,
                                                            const std::string& pattern) const {
  std::vector<std::string> out;
  std::string cursor = "0";
  do {
    absl::StatusOr<redis::ReplyPtr> r =
        Command(port, {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!r.ok()) return r.status();
    const redisReply* reply = r->get();
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2) {
      return absl::UnavailableError(absl::StrCat("SCAN on ", Address(port), ": ", Text(reply)));
    }
    cursor = Text(reply->element[0]);
    for (size_t i = 0; i < reply->element[1]->elements; ++i) {
      out.push_back(Text(reply->element[1]->element[i]));
    }
  } while (cursor != "0");
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::Status RedisCluster::MigrateSlot(int slot, const std::string& to_id) {
  absl::Status s = BeginSlotMigration(slot, to_id);
  if (s.ok()) s = MoveSlotKeys(slot);
  if (s.ok()) s = FinishSlotMigration(slot);
  return s;
}

absl::Status RedisCluster::BeginSlotMigration(int slot, const std::string& to_id) {
  absl::StatusOr<Node> from = SlotOwner(slot);
  if (!from.ok()) return from.status();
  absl::StatusOr<Node> to = NodeById(to_id);
  if (!to.ok()) return to.status();
  if (!to->primary || to->id == from->id) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot migrate slot ", slot, " to ", to->address(),
                     to->primary ? ": it already serves it" : ": not a primary"));
  }
  // Importing first, as redis-cli does: once the source answers ASK, the
  // target must accept ASKING for the slot.
  std::string s = absl::StrCat(slot);
  absl::Status st = CommandOk(to->port, {"CLUSTER", "SETSLOT", s, "IMPORTING", from->id});
  if (st.ok()) st = CommandOk(from->port, {"CLUSTER", "SETSLOT", s, "MIGRATING", to->id});
  if (!st.ok()) return st;
  migrations_[slot] = Migration{from->id, from->port, to->id, to->port};
  return absl::OkStatus();
}

absl::Status RedisCluster::MoveSlotKeys(int slot) {
  auto it = migrations_.find(slot);
  if (it == migrations_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("slot ", slot, " is not being migrated"));
  }
  const Migration& m = it->second;
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    absl::StatusOr<redis::ReplyPtr> keys = Command(
        m.from_port, {"CLUSTER", "GETKEYSINSLOT", absl::StrCat(slot), absl::StrCat(kMigrateBatch)});
    if (!keys.ok()) return keys.status();
    if ((*keys)->type != REDIS_REPLY_ARRAY) {
      return absl::UnavailableError(absl::StrCat("GETKEYSINSLOT: ", Text(keys->get())));
    }
    if ((*keys)->elements == 0) return absl::OkStatus();
    std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", absl::StrCat(m.to_port), "", "0",
                                        "5000",    "KEYS"};
    for (size_t i = 0; i < (*keys)->elements; ++i) migrate.push_back(Text((*keys)->element[i]));
    absl::StatusOr<redis::ReplyPtr> r = Command(m.from_port, migrate);
    if (!r.ok()) return r.status();
    std::string text = Text(r->get());
    // NOKEY: the keys expired meanwhile.
    if ((*r)->type != REDIS_REPLY_STATUS || (text != "OK" && text != "NOKEY")) {
      return absl::UnavailableError(absl::StrCat("MIGRATE of slot ", slot, ": ", text));
    }
  }
  return absl::UnavailableError(absl::StrCat("the keys of slot ", slot, " did not all move"));
}

absl::Status RedisCluster::FinishSlotMigration(int slot) {
  absl::Status s = MoveSlotKeys(slot);
  if (!s.ok()) return s;
  Migration m = migrations_[slot];
  migrations_.erase(slot);
  // The target first (it bumps its config epoch, so its claim wins), then
  // the source, then every other primary, as redis-cli does.
  std::vector<int> ports = {m.to_port, m.from_port};
  absl::StatusOr<std::vector<Node>> primaries = Primaries();
  if (!primaries.ok()) return primaries.status();
  for (const Node& p : *primaries) {
    if (p.port != m.to_port && p.port != m.from_port && !p.failed) ports.push_back(p.port);
  }
  for (int port : ports) {
    s = CommandOk(port, {"CLUSTER", "SETSLOT", absl::StrCat(slot), "NODE", m.to_id});
    if (!s.ok()) return s;
  }
  // Converged, and every node's view has the target serving the slot.
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  s = WaitConverged(deadline - absl::Now());
  if (!s.ok()) return s;
  absl::StatusOr<Node> owner = SlotOwner(slot);
  if (!owner.ok()) return owner.status();
  if (owner->id != m.to_id) {
    return absl::InternalError(absl::StrCat("slot ", slot, " ended up on ", owner->address()));
  }
  return absl::OkStatus();
}

absl::StatusOr<RedisCluster::Node> RedisCluster::KillPrimary(int i) {
  absl::StatusOr<std::vector<Node>> primaries = Primaries();
  if (!primaries.ok()) return primaries.status();
  if (i < 0 || i >= static_cast<int>(primaries->size())) {
    return absl::InvalidArgumentError(absl::StrCat("no primary ", i));
  }
  Node victim = (*primaries)[static_cast<size_t>(i)];
  for (auto& s : servers_) {
    if (s->port() == victim.port) s->Kill();
  }
  return victim;
}

absl::Status RedisCluster::WaitForFailover(const std::string& failed_primary_id,
                                           absl::Duration timeout) {
  // Converged means every slot is served by a running node: the failed
  // primary's slots have gone to its replica (nothing else takes them).
  absl::Status s = WaitConverged(timeout);
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("no failover of ", failed_primary_id, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status RedisCluster::WaitConverged(absl::Duration timeout) const {
  absl::Status last;
  if (WaitFor([&] { return (last = CheckConverged()).ok(); }, timeout, kPollStep)) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat("the cluster did not converge within ",
                                             absl::FormatDuration(timeout), ": ", last.message()));
}

absl::Status RedisCluster::CheckConverged() const {
  std::vector<int> running = RunningPorts();
  std::set<int> running_set(running.begin(), running.end());
  std::vector<std::tuple<int, int, int>> first_ranges;
  for (size_t i = 0; i < running.size(); ++i) {
    int port = running[i];
    absl::StatusOr<redis::ReplyPtr> info = Command(port, {"CLUSTER", "INFO"});
    if (!info.ok()) return info.status();
    std::string text = Text(info->get());
    if (!absl::StrContains(text, "cluster_state:ok")) {
      // The first lines: state, slot counts, known nodes, size.
      std::vector<absl::string_view> lines = absl::StrSplit(text, "\r\n");
      lines.resize(std::min<size_t>(lines.size(), 7));
      return absl::UnavailableError(
          absl::StrCat(Address(port), " is not ok: ", absl::StrJoin(lines, " ")));
    }
    absl::StatusOr<std::vector<Node>> nodes = NodesOf(port);
    if (!nodes.ok()) return nodes.status();
    std::set<int> healthy;
    std::vector<std::tuple<int, int, int>> ranges;
    for (const Node& n : *nodes) {
      if (!n.failed) healthy.insert(n.port);
      if (!n.primary) continue;
      for (const auto& [lo, hi] : n.slots) ranges.emplace_back(lo, hi, n.port);
    }
    for (int other : running) {
      if (healthy.count(other) == 0) {
        return absl::UnavailableError(
            absl::StrCat(Address(port), " does not see ", Address(other), " as healthy"));
      }
    }
    std::sort(ranges.begin(), ranges.end());
    int next = 0;
    for (const auto& [lo, hi, owner] : ranges) {
      if (lo != next || running_set.count(owner) == 0) {
        return absl::UnavailableError(absl::StrCat(Address(port), " sees slot ", next,
                                                   " unserved or served by a stopped node"));
      }
      next = hi + 1;
    }
    if (next != kSlots) {
      return absl::UnavailableError(
          absl::StrCat(Address(port), " sees slots from ", next, " unserved"));
    }
    if (i == 0) {
      first_ranges = std::move(ranges);
    } else if (ranges != first_ranges) {
      return absl::UnavailableError(
          absl::StrCat(Address(port), " and ", Address(running[0]), " disagree on the slot map"));
    }
  }
  return absl::OkStatus();
}

absl::Status RedisCluster::CheckTopology() const {
  for (int port : RunningPorts()) {
    absl::StatusOr<std::vector<Node>> nodes = NodesOf(port);
    if (!nodes.ok()) return nodes.status();
    std::map<std::string, int> replicas;  // by primary id
    for (const Node& n : *nodes) {
      if (n.primary && !n.slots.empty()) replicas.emplace(n.id, 0);
    }
    for (const Node& n : *nodes) {
      if (!n.primary && !n.failed && replicas.count(n.primary_id) != 0) ++replicas[n.primary_id];
    }
    if (static_cast<int>(replicas.size()) != options_.primaries) {
      return absl::UnavailableError(
          absl::StrCat(Address(port), " sees ", replicas.size(), " primaries"));
    }
    for (const auto& [id, n] : replicas) {
      if (n != options_.replicas_per_primary) {
        return absl::UnavailableError(
            absl::StrCat(Address(port), " sees ", n, " replicas of primary ", id));
      }
    }
    absl::StatusOr<redis::ReplyPtr> r = Command(port, {"INFO", "replication"});
    if (!r.ok()) return r.status();
    std::string info = Text(r->get());
    if (absl::StrContains(info, "role:slave") &&
        !absl::StrContains(info, "master_link_status:up")) {
      return absl::UnavailableError(absl::StrCat("replica ", Address(port), " is not in sync"));
    }
  }
  return absl::OkStatus();
}

}  // namespace lockd::testing
