#include "backends/zookeeper/zk_session.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backends/backend.h"
#include "util/log.h"

namespace lockd::zk {

Session::Session(Options options, TimerQueue* timers, Listener listener)
    : options_(std::move(options)), timers_(timers), listener_(std::move(listener)) {}

absl::Status Session::Start() {
  {
    absl::MutexLock l(&mu_);
    reason_ = absl::StrCat("connecting to ZooKeeper at ", options_.hosts);
  }
  if (absl::Status s = zk_->Open(); !s.ok()) {
    if (!absl::IsUnavailable(s)) return s;
    // E.g. the ensemble's DNS records do not exist yet (Kubernetes creates
    // them as its pods start): keep trying, as after an expiry.
    LogWarning("zookeeper backend: ", s.message(),
               "; retrying every second, serving UNAVAILABLE meanwhile");
    absl::MutexLock l(&mu_);
    reason_ = std::string(s.message());
    timers_->Schedule(absl::Seconds(1), [this] { Reopen(); });
  }
  absl::MutexLock l(&mu_);
  if (options_.silence_bound > absl::ZeroDuration()) {
    timers_->Schedule(options_.silence_bound / 4, [this] { Probe(); });
  }
  auto settled = [this]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ready_ || !root_error_.ok(); };
  mu_.AwaitWithTimeout(absl::Condition(&settled), options_.connect_wait);
  if (!root_error_.ok()) return root_error_;
  if (!ready_) {
    LogWarning("zookeeper backend: not connected after ",
               absl::FormatDuration(options_.connect_wait), " (", reason_,
               "); serving UNAVAILABLE until it connects");
  }
  return absl::OkStatus();
}

absl::Status Session::Usable() const {
  absl::MutexLock l(&mu_);
  if (stopped_) return ShuttingDownError();
  if (!ready_) return absl::UnavailableError(reason_);
  if (silent_) {
    return absl::UnavailableError(absl::StrCat("ZooKeeper at ", options_.hosts,
                                               " has not answered for ",
                                               absl::FormatDuration(options_.silence_bound)));
  }
  return absl::OkStatus();
}

bool Session::serving() const {
  absl::MutexLock l(&mu_);
  return ready_ && !silent_ && !stopped_;
}

void Session::Probe() {
  {
    absl::MutexLock l(&mu_);
    if (stopped_) return;
    timers_->Schedule(options_.silence_bound / 4, [this] { Probe(); });
    if (!ready_) return;
    if (probing_) {
      if (!silent_ && std::chrono::steady_clock::now() - probe_sent_ >=
                          absl::ToChronoNanoseconds(options_.silence_bound)) {
        silent_ = true;
        LogWarning("zookeeper backend: ZooKeeper at ", options_.hosts, " has not answered for ",
                   absl::FormatDuration(options_.silence_bound),
                   "; calls fail with UNAVAILABLE until it does");
      }
      return;
    }
    probing_ = true;
    probe_sent_ = std::chrono::steady_clock::now();
  }
  // Outside mu_: a probe that cannot be sent fails inline.
  zk_->Submit(Op::Get(options_.root, [this](Result r) {
    absl::MutexLock l(&mu_);
    probing_ = false;
    // An error from the client itself (connection lost, closed) is no
    // answer; the state event that comes with it says what happened.
    if (IsTransient(r.rc) || stopped_) return;
    if (silent_) LogInfo("zookeeper backend: ZooKeeper answers again; serving");
    silent_ = false;
  }));
}

void Session::Stop() {
  absl::MutexLock l(&mu_);
  stopped_ = true;
  ready_ = false;
}

void Session::OnState(SessionState state, uint64_t generation) {
  bool ensure_root = false, serving = false, lost = false;
  absl::Duration reopen_after;
  {
    absl::MutexLock l(&mu_);
    if (stopped_ || generation != zk_->generation()) return;
    switch (state) {
      case SessionState::kConnected:
        silent_ = false;
        if (generation != root_generation_) {
          ensure_root = true;
        } else {
          ready_ = true;
          serving = true;
          LogInfo("zookeeper backend: reconnected to ZooKeeper; serving");
        }
        break;
      case SessionState::kConnecting:
        if (ready_) {
          LogWarning(
              "zookeeper backend: lost the connection to ZooKeeper; reconnecting "
              "(calls fail with UNAVAILABLE meanwhile)");
        }
        ready_ = false;
        reason_ = absl::StrCat("not connected to ZooKeeper at ", options_.hosts);
        break;
      case SessionState::kExpired:
      case SessionState::kAuthFailed: {
        bool expired = state == SessionState::kExpired;
        ready_ = false;
        reason_ = expired ? "the ZooKeeper session expired; opening a new one"
                          : "ZooKeeper refused the credentials from zookeeper.auth_file";
        LogWarning("zookeeper backend: ", reason_,
                   "; locks held through this replica's session are lost");
        lost = true;
        reopen_after = expired ? absl::ZeroDuration() : absl::Seconds(1);
        break;
      }
    }
  }
  if (lost) {
    if (listener_.on_lost) listener_.on_lost();
    absl::MutexLock l(&mu_);
    if (!stopped_) timers_->Schedule(reopen_after, [this] { Reopen(); });
  }
  if (ensure_root) EnsureRoot(generation);
  if (serving && listener_.on_serving) listener_.on_serving();
}

void Session::Reopen() {
  {
    absl::MutexLock l(&mu_);
    if (stopped_) return;
  }
  absl::Status s = zk_->Reopen();
  if (!s.ok()) {
    absl::MutexLock l(&mu_);
    if (reason_ != s.message()) {  // once per new reason, not every second
      LogWarning("zookeeper backend: cannot open a new session: ", s.message(), "; retrying");
      reason_ = std::string(s.message());
    }
    if (!stopped_) timers_->Schedule(absl::Seconds(1), [this] { Reopen(); });
  }
}

// Creates the root (and its parents) for a new session, then checks that it
// can be read; only then does the backend serve.
void Session::EnsureRoot(uint64_t generation) {
  std::vector<std::string> parts = absl::StrSplit(options_.root, '/', absl::SkipEmpty());
  std::vector<Op> ops;
  std::string path;
  for (size_t i = 0; i < parts.size(); ++i) {
    absl::StrAppend(&path, "/", parts[i]);
    bool last = i + 1 == parts.size();
    // Parents of the root may be shared with other users of the ensemble:
    // only the root itself gets lockd's ACL.
    ops.push_back(Op::Create(path, "", ZOO_PERSISTENT, [this, generation, last](Result r) {
      if (!last) return;
      if (r.rc != ZOK && r.rc != ZNODEEXISTS) {
        RootFailed(generation, r.rc);
        return;
      }
      zk_->Submit(Op::Children(options_.root, [this, generation](Result c) {
        if (c.rc != ZOK) {
          RootFailed(generation, c.rc);
          return;
        }
        RootReady(generation);
      }));
    }));
    ops.back().open_acl = !last;
  }
  zk_->Submit(std::move(ops));
}

void Session::RootReady(uint64_t generation) {
  {
    absl::MutexLock l(&mu_);
    if (stopped_ || generation != zk_->generation()) return;
    root_generation_ = generation;
    ready_ = true;
    root_error_ = absl::OkStatus();
  }
  LogInfo("zookeeper backend: connected to ", options_.hosts, ", root ", options_.root);
  if (listener_.on_serving) listener_.on_serving();
}

void Session::RootFailed(uint64_t generation, int rc) {
  absl::Status s = ZkError(absl::StrCat("creating the root ", options_.root), rc);
  absl::MutexLock l(&mu_);
  if (stopped_ || generation != zk_->generation()) return;
  if (IsTransient(rc)) return;  // tried again on the next connect
  root_error_ = s;
  reason_ = std::string(s.message());
  LogError("zookeeper backend: ", s.message());
}

}  // namespace lockd::zk
