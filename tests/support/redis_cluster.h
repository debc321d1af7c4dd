// Test support: a Redis Cluster of real `redis-server` child processes (three
// primaries with one replica each by default) on free loopback ports, in
// temporary directories, without persistence, for the redis backend's
// cluster-mode tests. Each node is a RedisServer (redis_server.h) started
// with --cluster-enabled; the cluster is created by `redis-cli --cluster
// create`. Helpers move a slot to another primary (as `redis-cli --cluster
// reshard` does, one slot at a time, so that a test controls the moment) and
// kill a primary so that its replica takes over.
//
//   absl::StatusOr<std::unique_ptr<RedisCluster>> c = RedisCluster::Start();
//   RedisOptions o;
//   o.mode = RedisMode::kCluster;
//   o.addresses = (*c)->SeedAddresses();
//
// Usable with SharedServerTest<RedisCluster> (shared_server.h).
//
// Every query asks the nodes themselves (CLUSTER NODES, CLUSTER SLOTS, over a
// fresh connection per command), so answers reflect the cluster as it is,
// including changes the cluster made by itself (failovers).
//
// Not thread-safe: one test thread starts, queries and changes the cluster
// (other threads may use the cluster's servers through their own clients).

#ifndef LOCKD_TESTS_SUPPORT_REDIS_CLUSTER_H_
#define LOCKD_TESTS_SUPPORT_REDIS_CLUSTER_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/redis/redis_client.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"

namespace lockd::testing {

class RedisCluster {
 public:
  static constexpr int kSlots = 16384;

  struct Options {
    // At least 3: a failover needs the votes of a majority of primaries.
    int primaries = 3;
    int replicas_per_primary = 1;
    // cluster-node-timeout: how long a node may not answer before it counts
    // as failing. A failover after a kill takes about twice this.
    absl::Duration node_timeout = absl::Milliseconds(1500);
  };

  // A node as the cluster sees it (CLUSTER NODES of one running node).
  struct Node {
    std::string id;  // 40 hex digits
    int port = 0;
    bool primary = false;
    bool failed = false;     // flagged fail (or fail?) by the node asked
    std::string primary_id;  // a replica's primary; empty for a primary
    // Inclusive slot ranges served by a primary, ascending.
    std::vector<std::pair<int, int>> slots;

    std::string address() const;  // "127.0.0.1:<port>"
    bool Serves(int slot) const;
  };

  // Starts primaries * (1 + replicas_per_primary) redis-servers (found in
  // PATH or /usr/bin, /usr/sbin), creates the cluster with redis-cli, and
  // waits until it has converged (see WaitConverged) and every replica has
  // synchronised with its primary; all within `timeout`. kNotFound if
  // redis-server or redis-cli is missing; kUnavailable (with what was seen:
  // the servers' or redis-cli's log, or what did not converge) otherwise.
  // The servers die with the test process.
  static absl::StatusOr<std::unique_ptr<RedisCluster>> Start(
      const Options& options, absl::Duration timeout = absl::Seconds(60));
  static absl::StatusOr<std::unique_ptr<RedisCluster>> Start() { return Start(Options()); }

  // Kills every node.
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  const Options& options() const { return options_; }

  // "127.0.0.1:<port>,..." of every node started (also those since killed):
  // what a client is configured with as seed nodes.
  std::string SeedAddresses() const;
  // The ports of the nodes that run.
  std::vector<int> RunningPorts() const;

  // Every node as a running node sees it (killed nodes included, flagged
  // failed once the cluster noticed). kUnavailable if no node answers.
  absl::StatusOr<std::vector<Node>> Nodes() const;
  // The primaries that serve slots, ordered by their first slot.
  absl::StatusOr<std::vector<Node>> Primaries() const;
  // The replicas of primary `primary_id` that are not flagged failed.
  absl::StatusOr<std::vector<Node>> ReplicasOf(const std::string& primary_id) const;
  // The primary serving `slot`; kNotFound if none does.
  absl::StatusOr<Node> SlotOwner(int slot) const;

  // The slot of `key` (CLUSTER KEYSLOT: hash tags count).
  absl::StatusOr<int> KeySlot(const std::string& key) const;

  // Runs one command on the node at `port` over a fresh connection and
  // returns its reply, error replies included. kUnavailable if the node
  // cannot be reached or does not answer within 10 s.
  absl::StatusOr<redis::ReplyPtr> Command(int port, const std::vector<std::string>& args) const;
  // Runs one command on the primary that serves `key`'s slot.
  absl::StatusOr<redis::ReplyPtr> CommandForKey(const std::string& key,
                                                const std::vector<std::string>& args) const;
  // Every key matching `pattern` on the node at `port` (SCAN).
  absl::StatusOr<std::vector<std::string>> Keys(int port, const std::string& pattern) const;

  // Moves `slot`, with its keys, from the primary serving it to primary
  // `to_id`, and waits until every node agrees: BeginSlotMigration,
  // MoveSlotKeys, FinishSlotMigration. kInvalidArgument if `to_id` is not a
  // primary or already serves the slot; kUnavailable if a step fails.
  absl::Status MigrateSlot(int slot, const std::string& to_id);
  // The steps, for tests that act in between. Begin marks the slot
  // IMPORTING on `to_id` and MIGRATING on its owner: from then on the owner
  // answers ASK for the slot's keys it no longer has. MoveSlotKeys MIGRATEs
  // every key still on the owner to the target (keys created meanwhile too).
  // Finish moves any keys left, assigns the slot to the target on every
  // primary (CLUSTER SETSLOT NODE) and waits until every node agrees.
  // REQUIRES (Move, Finish): Begin succeeded for `slot`.
  absl::Status BeginSlotMigration(int slot, const std::string& to_id);
  absl::Status MoveSlotKeys(int slot);
  absl::Status FinishSlotMigration(int slot);

  // SIGKILLs the primary at index `i` of Primaries() and returns it as it
  // was; kInvalidArgument if there is no such primary. The cluster notices
  // after about options().node_timeout.
  absl::StatusOr<Node> KillPrimary(int i);
  // Waits until a replica of `failed_primary_id` has been promoted and took
  // over its slots, and the cluster has converged (WaitConverged: every slot
  // is then served by a running node, which for the killed primary's slots
  // can only be its replica). kUnavailable, saying what is still off, after
  // `timeout`.
  absl::Status WaitForFailover(const std::string& failed_primary_id,
                               absl::Duration timeout = absl::Seconds(30));

  // Waits until every running node says cluster_state:ok, knows every other
  // running node as healthy, and all agree on which primary serves each of
  // the 16384 slots (no slot unserved, none served by a failed node).
  // kUnavailable naming what is still off when `timeout` passes.
  absl::Status WaitConverged(absl::Duration timeout = absl::Seconds(30)) const;

 private:
  struct Migration {
    std::string from_id;
    int from_port = 0;
    std::string to_id;
    int to_port = 0;
  };

  explicit RedisCluster(const Options& options) : options_(options) {}
  absl::Status StartNodes(absl::Duration timeout);
  absl::Status Create(absl::Duration timeout);
  // OK if converged (see WaitConverged); otherwise why not.
  absl::Status CheckConverged() const;
  // OK once every running node sees `options_.primaries` primaries with
  // `options_.replicas_per_primary` replicas each, and every replica reports
  // its link to its primary up; otherwise why not.
  absl::Status CheckTopology() const;
  // CLUSTER NODES of the node at `port`.
  absl::StatusOr<std::vector<Node>> NodesOf(int port) const;
  // Runs a command that must answer +OK.
  absl::Status CommandOk(int port, const std::vector<std::string>& args) const;
  absl::StatusOr<Node> NodeById(const std::string& id) const;

  const Options options_;
  TempDir dir_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::map<int, Migration> migrations_;  // by slot
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_REDIS_CLUSTER_H_
