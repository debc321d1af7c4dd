#include "backends/redis/cluster_transport.h"

#include <algorithm>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "backends/backend.h"
#include "backends/redis/cluster_slots.h"
#include "backends/redis/subscriber.h"
#include "util/log.h"

namespace lockd::redis {
namespace {

// A command moved (-MOVED) more often than this fails: the map is churning.
constexpr int kMaxRedirects = 5;
// A command is retried after -ASK and -TRYAGAIN for at most this many
// command timeouts since its first redirection: a multi-key script gets
// -TRYAGAIN for as long as its slot is half migrated (some keys moved).
constexpr absl::Duration kMinRefreshInterval = absl::Milliseconds(200);
constexpr absl::Duration kPeriodicRefresh = absl::Seconds(10);
constexpr absl::Duration kTick = absl::Milliseconds(50);
constexpr int kRedirectBudget = 2;
constexpr absl::Duration kMinTryAgainDelay = absl::Milliseconds(25);
constexpr absl::Duration kMaxTryAgainDelay = absl::Milliseconds(200);

absl::StatusOr<SlotMap> FetchFrom(const ConnectionOptions& base, const Endpoint& node) {
  ConnectionOptions o = base;
  o.addresses = {node};
  size_t index = 0;
  absl::StatusOr<ContextPtr> c = Connect(o, {}, &index);
  if (!c.ok()) return c.status();
  std::string context = absl::StrCat(Where(node), ": CLUSTER SLOTS");
  ReplyPtr r(static_cast<redisReply*>(redisCommand(c->get(), "CLUSTER SLOTS")));
  if (r == nullptr) return RedisError(context, c->get(), nullptr);
  if (r->type == REDIS_REPLY_ERROR &&
      absl::StrContains(ReplyText(r.get()), "cluster support disabled")) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis.mode: cluster, but ", Where(node), " has cluster support disabled"));
  }
  return ParseClusterSlots(r.get(), node, context);
}

// The first complete map one of `nodes` gives, else the most complete one.
// Errors: the most telling error of a node (see Connect).
absl::StatusOr<SlotMap> FetchSlotMap(const ConnectionOptions& base,
                                     const std::vector<Endpoint>& nodes) {
  std::optional<SlotMap> best;
  absl::Status error;
  for (const Endpoint& node : nodes) {
    absl::StatusOr<SlotMap> map = FetchFrom(base, node);
    if (!map.ok()) {
      if (error.ok() || (error.code() == absl::StatusCode::kUnavailable &&
                         map.status().code() != absl::StatusCode::kUnavailable)) {
        error = map.status();
      }
      continue;
    }
    if (map->complete()) return map;
    if (!best.has_value() || map->unassigned() < best->unassigned()) best = *std::move(map);
  }
  if (best.has_value()) return *std::move(best);
  return error;
}

std::string PrimaryNames(const SlotMap& map) {
  std::vector<std::string> names;
  for (const Endpoint& e : map.primaries()) names.push_back(NodeName(e));
  std::sort(names.begin(), names.end());
  return absl::StrJoin(names, ",");
}

int SlotOf(const Command& cmd) {
  if (cmd.slot >= 0) return cmd.slot;
  return cmd.args.empty() ? 0 : HashSlot(cmd.args[0]);
}

// Thread-safe: the map, the nodes, the channel assignment and the queue of
// commands to resend are guarded by mu_; a Node is constant after
// construction (its pool and subscriber are thread-safe). Lock order: mu_,
// then a pool's or subscriber's own mutexes; pools and subscribers call back
// with no lock of theirs held.
class ClusterTransport final : public Transport, private RedirectHandler {
 public:
  ClusterTransport(TransportOptions options, Transport::Listener* listener)
      : options_(std::move(options)), listener_(listener) {}
  ~ClusterTransport() override { Stop(); }

  void Start(SlotMap map) {
    std::vector<std::shared_ptr<Node>> retired;
    {
      absl::MutexLock l(&mu_);
      retired = ApplyMap(std::move(map));
      last_refresh_ = absl::Now();
    }
    thread_ = std::thread([this] { Run(); });
  }

  absl::Status WaitReady(absl::Duration limit) override {
    absl::Time deadline = absl::Now() + limit;
    while (true) {
      absl::Status s = Health();
      if (s.ok() || absl::Now() >= deadline) return s;
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

  void Send(Command cmd) override {
    std::shared_ptr<Node> node;
    absl::Status s = NodeFor(cmd, &node);
    if (s.ok()) s = Submit(*node, cmd, nullptr);
    if (!s.ok()) std::move(cmd.done)(s);
  }

  void Send(Command cmd, Command then) override {
    if (SlotOf(cmd) != SlotOf(then)) {
      Send(std::move(cmd));
      Send(std::move(then));
      return;
    }
    std::shared_ptr<Node> node;
    absl::Status s = NodeFor(cmd, &node);
    then.redirect = this;
    if (s.ok()) s = Submit(*node, cmd, &then);
    if (!s.ok()) {
      std::move(cmd.done)(s);
      std::move(then.done)(s);
    }
  }

  void SendAll(std::vector<Command> cmds) override {
    std::vector<std::pair<std::shared_ptr<Node>, std::vector<Command>>> groups;
    for (Command& cmd : cmds) {
      std::shared_ptr<Node> node;
      absl::Status s = NodeFor(cmd, &node);
      if (!s.ok()) {
        std::move(cmd.done)(s);
        continue;
      }
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == node; });
      if (it == groups.end()) {
        groups.emplace_back(node, std::vector<Command>());
        it = groups.end() - 1;
      }
      it->second.push_back(std::move(cmd));
    }
    for (auto& [node, group] : groups) {
      absl::Status s = node->pool->SubmitAll(group);
      if (s.ok()) continue;
      s = Unsent(*node, group.front().context, s);
      for (Command& c : group) std::move(c.done)(s);
    }
  }

  std::vector<int> ScanSlots() const override {
    absl::ReaderMutexLock l(&mu_);
    std::vector<int> slots = map_.FirstSlots();
    slots.erase(std::remove(slots.begin(), slots.end(), -1), slots.end());
    return slots;
  }

  void Subscribe(const std::string& channel) override {
    absl::MutexLock l(&mu_);
    if (stop_) return;
    auto [it, inserted] = channels_.try_emplace(channel);
    if (!inserted) return;
    int owner = map_.owner(HashSlot(channel));
    if (owner < 0) {
      refresh_wanted_ = true;  // subscribed once a primary serves the slot
      return;
    }
    const std::shared_ptr<Node>& node = primaries_[static_cast<size_t>(owner)];
    it->second = node->name;
    node->subscriber->Subscribe(channel);
  }

  void Unsubscribe(const std::string& channel) override {
    absl::MutexLock l(&mu_);
    auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    auto node = nodes_.find(it->second);
    if (node != nodes_.end()) node->second->subscriber->Unsubscribe(channel);
    channels_.erase(it);
    lost_.erase(channel);
  }

  absl::Status Health() const override {
    absl::ReaderMutexLock l(&mu_);
    if (stop_) return ShuttingDownError();
    if (!map_.complete()) {
      return absl::UnavailableError(absl::StrCat("redis cluster: ", map_.unassigned(), " of ",
                                                 kClusterSlots, " slots have no known primary"));
    }
    for (const std::shared_ptr<Node>& node : primaries_) {
      if (node->pool->connected() == 0) {
        return absl::UnavailableError(
            absl::StrCat("redis cluster primary ", node->name,
                         " is unreachable: ", node->pool->last_error().message()));
      }
      if (!node->subscriber->connected()) {
        return absl::UnavailableError(absl::StrCat(
            "redis cluster primary ", node->name,
            ": subscriber connection is down: ", node->subscriber->last_error().message()));
      }
    }
    return absl::OkStatus();
  }

  void PrimaryMoved() override { RequestRefresh(); }

  void Stop() override {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
      stop_ = true;
      wake_.Signal();
    }
    if (thread_.joinable()) thread_.join();
    std::vector<Pending> queued;
    std::vector<std::shared_ptr<Node>> nodes;
    {
      absl::MutexLock l(&mu_);
      queued.swap(queue_);
      for (auto& [name, node] : nodes_) nodes.push_back(node);
      nodes_.clear();
      primaries_.clear();
    }
    for (Pending& p : queued) std::move(p.cmd.done)(ShuttingDownError());
    StopNodes(nodes);
  }

 private:
  // A primary: its command connections and its subscriber connection.
  struct Node final : Subscriber::Listener {
    ClusterTransport* transport = nullptr;
    std::string name;  // NodeName()
    std::unique_ptr<CommandPool> pool;
    std::unique_ptr<Subscriber> subscriber;

    void OnSubscribed(const std::string& channel) override {
      transport->NodeSubscribed(name, channel);
    }
    void OnMessage(const std::string& channel, absl::string_view message) override {
      transport->listener_->OnMessage(channel, message);
    }
    void OnConnectionLost(const absl::Status& why) override { transport->NodeLost(name); }
    void OnChannelLost(const std::string& channel, absl::string_view why) override {
      transport->ChannelLost(name, channel);
    }
  };

  // A redirected command waiting to be resent.
  struct Pending {
    Command cmd;
    absl::Time not_before;
    bool after_refresh = false;  // resent once the map was refreshed
  };

  // Finds the primary for `cmd` (and makes `cmd` redirectable); an error
  // when there is none.
  absl::Status NodeFor(Command& cmd, std::shared_ptr<Node>* node) {
    cmd.redirect = this;
    const int slot = SlotOf(cmd);
    {
      absl::ReaderMutexLock l(&mu_);
      if (stop_) return ShuttingDownError();
      int owner = map_.owner(slot);
      if (owner >= 0) {
        *node = primaries_[static_cast<size_t>(owner)];
        return absl::OkStatus();
      }
    }
    RequestRefresh();
    return absl::UnavailableError(absl::StrCat(cmd.context,
                                               ": no redis cluster primary serves slot ", slot,
                                               " (the slot map is being refreshed)"));
  }

  // Writes `cmd` (and `then`, if not null) to `node`; the error otherwise
  // (neither was sent).
  absl::Status Submit(Node& node, Command& cmd, Command* then) {
    absl::Status s = then == nullptr ? node.pool->Submit(cmd) : node.pool->Submit(cmd, *then);
    return s.ok() ? s : Unsent(node, cmd.context, s);
  }

  // Why a command could not be written to `node`: asks for a map refresh
  // (the primary may have failed over) and words a retired node's refusal.
  absl::Status Unsent(Node& node, absl::string_view context, const absl::Status& s) {
    absl::MutexLock l(&mu_);
    if (stop_) return ShuttingDownError();
    refresh_wanted_ = true;
    if (s.message() == ShuttingDownError().message()) {
      return absl::UnavailableError(
          absl::StrCat(context, ": redis cluster node ", node.name, " is no longer a primary"));
    }
    return s;
  }

  void OnRedirect(Command cmd, ReplyPtr reply) override {
    const std::string text(ReplyText(reply.get()));
    std::optional<Redirect> r = ParseRedirect(text);
    const absl::Time now = absl::Now();
    cmd.first_redirect = std::min(cmd.first_redirect, now);
    if (r.has_value() && r->kind == Redirect::Kind::kMoved) ++cmd.redirects;
    if (cmd.redirects > kMaxRedirects ||
        now - cmd.first_redirect > kRedirectBudget * options_.connection.command_timeout) {
      RequestRefresh();
      std::move(cmd.done)(absl::UnavailableError(
          absl::StrCat(cmd.context, ": redis cluster kept redirecting the command (last: ", text,
                       "); the cluster is resharding or failing over")));
      return;
    }
    std::shared_ptr<Node> target;
    {
      absl::MutexLock l(&mu_);
      if (!stop_) {
        auto it = r.has_value() ? nodes_.find(NodeName(r->target)) : nodes_.end();
        if (r.has_value() && it != nodes_.end()) {
          target = it->second;
          if (r->kind == Redirect::Kind::kMoved) {
            // The node is a primary already: only this slot's owner changes.
            map_.Assign(r->slot, r->slot, r->target);
            refresh_wanted_ = true;
          }
        } else {
          // TRYAGAIN: later; a node not in the map: after the next refresh.
          const absl::Time not_before = now + std::clamp((now - cmd.first_redirect) / 2,
                                                         kMinTryAgainDelay, kMaxTryAgainDelay);
          Pending p{std::move(cmd), not_before, false};
          if (r.has_value()) {
            p.after_refresh = true;
            refresh_wanted_ = true;
          }
          queue_.push_back(std::move(p));
          wake_.Signal();
          return;
        }
      }
    }
    if (target == nullptr) {
      std::move(cmd.done)(ShuttingDownError());
      return;
    }
    absl::Status s;
    if (r->kind == Redirect::Kind::kMoved) {
      s = Submit(*target, cmd, nullptr);
    } else {
      Command asking;
      asking.args = {"ASKING"};
      asking.context = cmd.context;
      asking.done = [](absl::StatusOr<ReplyPtr>) {};
      s = Submit(*target, asking, &cmd);
    }
    if (!s.ok()) std::move(cmd.done)(s);
  }

  void RequestRefresh() {
    absl::MutexLock l(&mu_);
    refresh_wanted_ = true;
  }

  void NodeSubscribed(const std::string& node, const std::string& channel) {
    bool forward;
    {
      absl::ReaderMutexLock l(&mu_);
      auto it = channels_.find(channel);
      forward = it != channels_.end() && it->second == node;
    }
    if (forward) listener_->OnSubscribed(channel);
  }

  void NodeLost(const std::string& name) {
    absl::MutexLock l(&mu_);
    refresh_wanted_ = true;
    // Idle command connections to a server that went away would fail their
    // next command; replace them now.
    auto it = nodes_.find(name);
    if (it != nodes_.end()) it->second->pool->ResetConnections();
  }

  void ChannelLost(const std::string& node, const std::string& channel) {
    absl::MutexLock l(&mu_);
    auto it = channels_.find(channel);
    if (it == channels_.end() || it->second != node) return;
    lost_.insert(channel);
    refresh_wanted_ = true;
  }

  std::shared_ptr<Node> NewNode(const Endpoint& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto node = std::make_shared<Node>();
    node->transport = this;
    node->name = NodeName(e);
    ConnectionOptions c = options_.connection;
    c.addresses = {e};
    node->pool = std::make_unique<CommandPool>(c, options_.scripts, options_.pool_size,
                                               options_.backoff_min, options_.backoff_max);
    node->subscriber =
        std::make_unique<Subscriber>(c, node.get(), options_.backoff_min, options_.backoff_max,
                                     options_.ping_interval, /*sharded=*/true);
    absl::Status s = node->subscriber->Start();
    if (!s.ok()) LogWarning("redis cluster: ", node->name, ": ", s.message());
    return node;
  }

  // Makes `map` the map: starts the new primaries' connections, moves the
  // subscriptions whose slot moved (or that were lost), and returns the
  // nodes that are no longer primaries (for the caller to stop, unlocked).
  std::vector<std::shared_ptr<Node>> ApplyMap(SlotMap map) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    map_ = std::move(map);
    absl::flat_hash_map<std::string, std::shared_ptr<Node>> next;
    primaries_.clear();
    for (const Endpoint& e : map_.primaries()) {
      std::string name = NodeName(e);
      auto it = nodes_.find(name);
      std::shared_ptr<Node> node = it != nodes_.end() ? it->second : NewNode(e);
      primaries_.push_back(node);
      next.emplace(std::move(name), std::move(node));
    }
    std::vector<std::shared_ptr<Node>> retired;
    for (auto& [name, node] : nodes_) {
      if (!next.contains(name)) retired.push_back(node);
    }
    nodes_ = std::move(next);
    for (auto& [channel, assigned] : channels_) {
      int owner = map_.owner(HashSlot(channel));
      const std::shared_ptr<Node>* to =
          owner < 0 ? nullptr : &primaries_[static_cast<size_t>(owner)];
      if (to != nullptr && (*to)->name == assigned && !lost_.contains(channel)) continue;
      auto from = nodes_.find(assigned);
      if (from != nodes_.end()) from->second->subscriber->Unsubscribe(channel);
      assigned = to == nullptr ? "" : (*to)->name;
      if (to != nullptr) (*to)->subscriber->Subscribe(channel);
    }
    lost_.clear();
    return retired;
  }

  static void StopNodes(const std::vector<std::shared_ptr<Node>>& nodes) {
    for (const std::shared_ptr<Node>& node : nodes) {
      node->subscriber->Stop();
      node->pool->Stop();
    }
  }

  // Whether the map should be read again now (rate-limited).
  bool RefreshDue(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (now - last_refresh_ < kMinRefreshInterval) return false;
    if (refresh_wanted_ || !map_.complete() || now - last_refresh_ >= kPeriodicRefresh) return true;
    for (const std::shared_ptr<Node>& node : primaries_) {
      if (node->pool->connected() == 0 || !node->subscriber->connected()) return true;
    }
    return false;
  }

  void Refresh() {
    std::vector<Endpoint> candidates;
    {
      absl::MutexLock l(&mu_);
      refresh_wanted_ = false;
      candidates = map_.primaries();
    }
    for (const Endpoint& seed : options_.connection.addresses) candidates.push_back(seed);
    absl::StatusOr<SlotMap> map = FetchSlotMap(options_.connection, candidates);
    std::vector<std::shared_ptr<Node>> retired;
    std::vector<Pending> resend;
    {
      absl::MutexLock l(&mu_);
      last_refresh_ = absl::Now();
      if (map.ok()) {
        std::string before = PrimaryNames(map_);
        std::string after = PrimaryNames(*map);
        if (before != after || map->unassigned() != map_.unassigned()) {
          LogInfo("redis cluster: primaries ", after, "; ", map->unassigned(),
                  " slots without a primary");
        }
        retired = ApplyMap(*std::move(map));
      } else if (!refresh_failure_logged_) {
        LogWarning("redis cluster: cannot read the slot map: ", map.status().message());
      }
      refresh_failure_logged_ = !map.ok();
      for (auto it = queue_.begin(); it != queue_.end();) {
        if (!it->after_refresh) {
          ++it;
          continue;
        }
        resend.push_back(std::move(*it));
        it = queue_.erase(it);
      }
    }
    for (Pending& p : resend) Send(std::move(p.cmd));
    StopNodes(retired);
  }

  void Run() {
    BlockSigpipeOnThisThread();
    while (true) {
      std::vector<Pending> due;
      bool refresh;
      {
        absl::MutexLock l(&mu_);
        wake_.WaitWithTimeout(&mu_, kTick);
        if (stop_) return;
        const absl::Time now = absl::Now();
        for (auto it = queue_.begin(); it != queue_.end();) {
          if (it->after_refresh || it->not_before > now) {
            ++it;
            continue;
          }
          due.push_back(std::move(*it));
          it = queue_.erase(it);
        }
        refresh = RefreshDue(now);
      }
      for (Pending& p : due) Send(std::move(p.cmd));
      if (refresh) Refresh();
    }
  }

  // Constant after construction.
  const TransportOptions options_;
  Transport::Listener* const listener_;

  mutable absl::Mutex mu_;
  absl::CondVar wake_;  // the thread: stop, or a redirected command queued
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  SlotMap map_ ABSL_GUARDED_BY(mu_);
  // The map's primaries, by index (map_.owner()) and by name.
  std::vector<std::shared_ptr<Node>> primaries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<Node>> nodes_ ABSL_GUARDED_BY(mu_);
  // Wanted channels -> the node they are subscribed on ("": none yet).
  absl::flat_hash_map<std::string, std::string> channels_ ABSL_GUARDED_BY(mu_);
  // Wanted channels whose node refused or dropped them.
  absl::flat_hash_set<std::string> lost_ ABSL_GUARDED_BY(mu_);
  std::vector<Pending> queue_ ABSL_GUARDED_BY(mu_);
  bool refresh_wanted_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_refresh_ ABSL_GUARDED_BY(mu_);
  bool refresh_failure_logged_ = false;  // the thread only
  std::thread thread_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> NewClusterTransport(TransportOptions options,
                                                               Transport::Listener* listener) {
  absl::StatusOr<SlotMap> map = FetchSlotMap(options.connection, options.connection.addresses);
  if (!map.ok()) return map.status();
  auto t = std::make_unique<ClusterTransport>(std::move(options), listener);
  t->Start(*std::move(map));
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace lockd::redis
