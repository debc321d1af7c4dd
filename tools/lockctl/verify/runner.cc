#include "tools/lockctl/verify/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "tools/lockctl/verify/history.h"
#include "tools/lockctl/verify/referee.h"
#include "tools/lockctl/verify/wire.h"
#include "tools/lockctl/verify/worker.h"

namespace lockd::lockctl::verify {

const char* WorkloadName(Workload w) {
  switch (w) {
    case Workload::kMutex:
      return "mutex";
    case Workload::kRw:
      return "rw";
    case Workload::kSemaphore:
      return "semaphore";
    case Workload::kAcquireAll:
      return "acquire-all";
  }
  return "?";
}

absl::StatusOr<std::vector<Workload>> ParseWorkloads(absl::string_view text) {
  std::vector<Workload> out;
  for (absl::string_view name : absl::StrSplit(text, ',')) {
    bool known = false;
    for (Workload w :
         {Workload::kMutex, Workload::kRw, Workload::kSemaphore, Workload::kAcquireAll}) {
      if (name != WorkloadName(w)) continue;
      known = true;
      if (std::find(out.begin(), out.end(), w) != out.end()) {
        return absl::InvalidArgumentError(absl::StrCat("--workload: \"", name, "\" given twice"));
      }
      out.push_back(w);
    }
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("--workload: unknown workload \"", name,
                       "\" (use mutex, rw, semaphore, acquire-all, comma-separated)"));
    }
  }
  return out;
}

absl::StatusOr<ApiMode> ParseApiMode(absl::string_view text) {
  if (text == "session") return ApiMode::kSession;
  if (text == "unary") return ApiMode::kUnary;
  if (text == "both") return ApiMode::kBoth;
  return absl::InvalidArgumentError(
      absl::StrCat("--api must be session, unary or both, not \"", text, "\""));
}

namespace {

// The lock names of each workload (all under "verify/").
constexpr int kMutexLocks = 2;
constexpr int kAllLocks = 3;  // acquire-all takes 2 of these 3
constexpr uint32_t kSemaphoreLimit = 3;
constexpr char kOwnerPrefix[] = "lockd-verify-";

// The client's rule (lockd/client.h "Sessions"): a session hold needs
// 2/3 ttl - drift above the keepalive's time + timeout (2 s + 2 s by
// default), else the Client takes it unary.
bool HoldsOverSession(bool session_worker, absl::Duration ttl) {
  const absl::Duration drift = ttl * 0.01 + absl::Milliseconds(2);
  return session_worker && ttl * 2 / 3 - drift > absl::Seconds(4);
}

// A worker's valid_until (steady_clock nanoseconds, 0 for none) as a
// steady_clock time point (max() for none).
std::chrono::steady_clock::time_point SteadyPoint(int64_t ns) {
  if (ns == 0) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

LockKind KindOf(TaskKind kind) {
  switch (kind) {
    case TaskKind::kShared:
      return LockKind::kShared;
    case TaskKind::kSemaphore:
      return LockKind::kSemaphore;
    case TaskKind::kLock:
    case TaskKind::kAll:
      return LockKind::kExclusive;
  }
  return LockKind::kExclusive;
}

// One worker process, as the runner sees it.
struct Slot {
  enum class State { kIdle, kAcquiring, kHolding, kReleasing };
  int process = 0;  // history process number (a replacement gets a new one)
  pid_t pid = -1;
  std::string owner;
  std::string replica;  // the one lockd it talks to; "" for a target it balances over
  bool session = true;  // a session worker (ClientOptions::use_sessions)
  State state = State::kIdle;
  Task task;                     // the current task (kAcquiring .. kReleasing)
  std::vector<uint64_t> tokens;  // of the task's locks, once granted
  bool pause_at_write = false;   // the nemesis stops it at its next write
  bool paused_hold = false;      // its current hold was paused (no bound at release)
  bool killed = false;           // SIGKILLed (or killed at the time box): ignore it
  bool abandon = false;          // told to abandon at its next release
  bool paused = false;
  absl::Time resume_at = absl::InfiniteFuture();
  bool gone = false;  // its pipe closed
};

// A worker's pipe and serving thread (main thread only).
struct Conn {
  int process = 0;
  std::unique_ptr<LineChannel> pipe;
  std::thread thread;
};

class Run {
 public:
  Run(const VerifyOptions& options, std::ostream& err)
      : o_(options),
        err_(err),
        run_id_(absl::StrFormat("%08x", static_cast<uint32_t>(std::random_device()()))),
        rng_(options.seed != 0 ? options.seed : std::random_device()()),
        nemesis_(options.nemesis, options.nemesis_interval, rng_()) {}

  int Execute(std::ostream& out);

 private:
  absl::Status Preflight(Client& client);
  absl::Status Spawn(bool session);
  void Serve(int process, LineChannel* pipe);
  std::vector<std::string> Handle(int process, const std::vector<std::string>& req);
  std::vector<std::string> HandleNext(Slot& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Task NextTask() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NemesisLoop();
  void Strike(Slot& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An event of worker `s` on `lock` (owner set), stamped and recorded by
  // the caller.
  Event WorkerEvent(const Slot& s, EventType type, Op f, const std::string& lock) const;
  // One event per lock of s's task: `fill` completes each (given the lock's
  // index), then it is recorded now.
  void RecordPerLock(const Slot& s, EventType type, Op f,
                     const std::function<void(size_t, Event&)>& fill)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordNemesis(const Slot& s, Op f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int Cleanup(Client& client);
  void PrintHeader(std::ostream& out) const;

  const VerifyOptions o_;
  std::ostream& err_;
  const std::string run_id_;
  std::string binary_;
  // The replicas of a --server list (one entry for a single address); empty
  // for a DNS name or another gRPC target, given to every worker as it is.
  std::vector<std::string> replicas_;
  int dev_null_ = -1;
  Referee referee_;
  std::ofstream history_file_;
  std::unique_ptr<HistoryRecorder> history_;  // thread-safe; set before the workers start

  absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  NemesisPolicy nemesis_ ABSL_GUARDED_BY(mu_);
  std::map<int, Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> respawn_ ABSL_GUARDED_BY(mu_);  // session flags of workers to replace
  // Tasks of struck holders, handed out again first: their locks are wanted
  // at once, so that the time to their next grant is lockd's, not the
  // workload's (liveness).
  std::vector<Task> wanted_ ABSL_GUARDED_BY(mu_);
  int next_process_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_task_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_acquire_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // the nemesis ends

  std::vector<std::unique_ptr<Conn>> conns_;  // main thread only
};

absl::Status Run::Preflight(Client& client) {
  ListOptions lo;
  lo.ns = o_.ns;
  while (true) {
    absl::StatusOr<ListPage> page = client.List(lo);
    if (!page.ok()) return page.status();
    for (const LockInfo& lock : page->locks) {
      for (const Holder& h : lock.holders) {
        if (absl::StartsWith(h.owner, kOwnerPrefix)) continue;
        return absl::FailedPreconditionError(
            absl::StrCat("namespace \"", o_.ns, "\" holds locks verify did not create (\"",
                         lock.name, "\" held by \"", h.owner,
                         "\"); give verify a namespace of its own (--namespace) or --force"));
      }
    }
    if (page->next_page_token.empty()) return absl::OkStatus();
    lo.page_token = page->next_page_token;
  }
}

absl::Status Run::Spawn(bool session) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return absl::InternalError(absl::StrCat("socketpair: ", ::strerror(errno)));
  }
  int process;
  {
    absl::MutexLock l(&mu_);
    process = next_process_++;
  }
  std::string arg0 = binary_, arg1 = kWorkerCommand;
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  const pid_t parent = ::getpid();
  const int child_end = sv[1];
  const int null_fd = dev_null_;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    return absl::InternalError(absl::StrCat("fork: ", ::strerror(errno)));
  }
  if (pid == 0) {
    // Async-signal-safe calls only until exec. The worker dies with us.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(1);
    if (child_end == kWorkerFd) {
      ::fcntl(kWorkerFd, F_SETFD, 0);
    } else {
      ::dup2(child_end, kWorkerFd);
    }
    if (null_fd >= 0) ::dup2(null_fd, STDOUT_FILENO);
    ::execv(argv[0], argv);
    _exit(127);
  }
  ::close(sv[1]);
  auto conn = std::make_unique<Conn>();
  conn->process = process;
  conn->pipe = std::make_unique<LineChannel>(sv[0]);
  WorkerConfig c;
  // A list's replicas are dealt out to the workers in turn, so that each
  // replica serves holders and a session never lands on one by chance.
  const std::string replica =
      replicas_.empty() ? "" : replicas_[static_cast<size_t>(process) % replicas_.size()];
  c.server = replica.empty() ? o_.server : replica;
  c.ns = o_.ns;
  c.owner = absl::StrCat(kOwnerPrefix, run_id_, "-p", process);
  c.session = session;
  c.ttl = o_.ttl;
  c.wait = o_.wait;
  c.rpc_timeout = o_.rpc_timeout;
  c.tls = o_.tls;
  c.auth = o_.auth;
  {
    absl::MutexLock l(&mu_);
    Slot& s = slots_[process];
    s.process = process;
    s.pid = pid;
    s.owner = c.owner;
    s.replica = replica;
    s.session = session;
  }
  if (!conn->pipe->Write(EncodeConfig(c)).ok()) {
    return absl::InternalError("a worker did not start (its pipe closed)");
  }
  LineChannel* pipe = conn->pipe.get();
  conn->thread = std::thread([this, process, pipe] { Serve(process, pipe); });
  conns_.push_back(std::move(conn));
  return absl::OkStatus();
}

void Run::Serve(int process, LineChannel* pipe) {
  while (std::optional<std::vector<std::string>> req = pipe->Read()) {
    std::vector<std::string> reply = Handle(process, *req);
    if (reply.empty() || !pipe->Write(reply).ok()) break;
  }
  absl::MutexLock l(&mu_);
  Slot& s = slots_[process];
  s.gone = true;
  if (!s.killed && !s.abandon && s.state != Slot::State::kIdle) {
    // It died on its own in the middle of a task: to lockd, a client whose
    // connection dropped.
    err_ << "lockctl verify: worker " << process << " exited in the middle of a task\n";
    RecordNemesis(s, Op::kAbandon);
  }
  s.state = Slot::State::kIdle;
  if ((s.killed || s.abandon) && !stopping_) respawn_.push_back(s.session);
}

Event Run::WorkerEvent(const Slot& s, EventType type, Op f, const std::string& lock) const {
  Event e;
  e.process = s.process;
  e.type = type;
  e.f = f;
  e.lock = lock;
  e.owner = s.owner;
  return e;
}

void Run::RecordPerLock(const Slot& s, EventType type, Op f,
                        const std::function<void(size_t, Event&)>& fill) {
  for (size_t i = 0; i < s.task.locks.size(); ++i) {
    Event e = WorkerEvent(s, type, f, s.task.locks[i].name);
    fill(i, e);
    history_->RecordNow(std::move(e));
  }
}

void Run::RecordNemesis(const Slot& s, Op f) {
  Event e;
  e.process = s.process;
  e.type = EventType::kInfo;
  e.f = f;
  history_->RecordNow(std::move(e));
}

Task Run::NextTask() {
  Task task;
  task.id = ++next_task_;
  const int64_t hold_us = absl::ToInt64Microseconds(o_.hold);
  task.hold = absl::Microseconds(
      std::uniform_int_distribution<int64_t>(std::max<int64_t>(hold_us / 10, 1), hold_us)(rng_));
  Workload w =
      o_.workloads[std::uniform_int_distribution<size_t>(0, o_.workloads.size() - 1)(rng_)];
  std::uniform_real_distribution<double> coin(0, 1);
  switch (w) {
    case Workload::kMutex:
      task.kind = TaskKind::kLock;
      task.locks.push_back({absl::StrCat("verify/mutex/", std::uniform_int_distribution<int>(
                                                              0, kMutexLocks - 1)(rng_)),
                            0, 0});
      break;
    case Workload::kRw:
      task.kind = coin(rng_) < 0.9 ? TaskKind::kShared : TaskKind::kLock;
      task.locks.push_back({"verify/rw", 0, 0});
      break;
    case Workload::kSemaphore:
      task.kind = TaskKind::kSemaphore;
      task.locks.push_back({"verify/semaphore", kSemaphoreLimit, coin(rng_) < 0.7 ? 1u : 2u});
      break;
    case Workload::kAcquireAll: {
      task.kind = TaskKind::kAll;
      std::vector<int> names(kAllLocks);
      for (int i = 0; i < kAllLocks; ++i) names[i] = i;
      std::shuffle(names.begin(), names.end(), rng_);
      for (int i = 0; i < 2; ++i) {
        task.locks.push_back({absl::StrCat("verify/all/", names[i]), 0, 0});
      }
      break;
    }
  }
  return task;
}

std::vector<std::string> Run::HandleNext(Slot& s) {
  if (stopping_) return {"stop"};
  // The rate bound: each acquire takes the next free slot of 1/rate.
  const absl::Time now = absl::Now();
  const absl::Time at = std::max(now, next_acquire_);
  next_acquire_ = at + absl::Seconds(1) / o_.rate;
  if (at > now) {
    mu_.Unlock();
    absl::SleepFor(at - now);
    mu_.Lock();
    if (stopping_ || s.killed) return {"stop"};
  }
  if (wanted_.empty()) {
    s.task = NextTask();
  } else {
    s.task = wanted_.back();
    wanted_.pop_back();
    s.task.id = ++next_task_;
  }
  s.state = Slot::State::kAcquiring;
  s.tokens.clear();
  const bool session = HoldsOverSession(s.session, o_.ttl);
  RecordPerLock(s, EventType::kInvoke, Op::kAcquire, [&](size_t i, Event& e) {
    const TaskLock& lock = s.task.locks[i];
    e.kind = KindOf(s.task.kind);
    e.permits = lock.permits;
    e.limit = lock.limit;
    e.ttl_ns = absl::ToInt64Nanoseconds(o_.ttl);
    e.api = session ? Api::kSession : Api::kUnary;
    // FIFO is compared among one replica's waiters; AcquireAll waits for its
    // locks one after the other, so its place in a lock's queue is not its
    // invoke's: left out.
    if (s.task.kind != TaskKind::kAll) e.replica = s.replica;
  });
  return EncodeTask(s.task);
}

std::vector<std::string> Run::Handle(int process, const std::vector<std::string>& req) {
  absl::MutexLock l(&mu_);
  Slot& s = slots_[process];
  if (s.killed || req.empty()) return {};
  const std::string& what = req[0];
  auto u64 = [&](size_t i) {
    uint64_t v = 0;
    if (i < req.size()) (void)absl::SimpleAtoi(req[i], &v);
    return v;
  };
  auto i64 = [&](size_t i) {
    int64_t v = 0;
    if (i < req.size()) (void)absl::SimpleAtoi(req[i], &v);
    return v;
  };
  if (what == "next") return HandleNext(s);
  if (what == "granted" && req.size() == 3 + s.task.locks.size()) {
    for (size_t i = 3; i < req.size(); ++i) s.tokens.push_back(u64(i));
    s.state = Slot::State::kHolding;
    const int64_t bound = history_->LeaseBoundNs(SteadyPoint(i64(2)));
    RecordPerLock(s, EventType::kOk, Op::kAcquire, [&](size_t i, Event& e) {
      e.token = s.tokens[i];
      e.valid_until_ns = bound;
    });
    return {"ok"};
  }
  if (what == "failed" && req.size() >= 5) {
    s.state = Slot::State::kIdle;
    // Not acquired in time (the client's DEADLINE_EXCEEDED) leaves no hold;
    // an acquire whose undo went unanswered may have left one: unknown.
    const bool uncertain = req[3] == "1";
    const std::string error = req[2] == "DEADLINE_EXCEEDED" ? "NOT_ACQUIRED" : req[2];
    RecordPerLock(s, uncertain ? EventType::kInfo : EventType::kFail, Op::kAcquire,
                  [&](size_t, Event& e) { e.error = error; });
    return {"ok"};
  }
  if (what == "read" && req.size() == 3) {
    Referee::Counters c = referee_.Read(req[1], u64(2));
    return {"value", absl::StrCat(c.fenced), absl::StrCat(c.unfenced)};
  }
  if (what == "write" && req.size() == 5) {
    if (s.pause_at_write) {
      // The worker checked its lease and sent the write: stopped now, its
      // write lands when it resumes, after its lease ran out and the lock
      // went on to others (a process paused between its check and its write).
      s.pause_at_write = false;
      ::kill(s.pid, SIGSTOP);
      s.paused = true;
      s.paused_hold = true;
      s.resume_at = absl::Now() + 2 * o_.ttl + absl::Milliseconds(500);
      mu_.Await(absl::Condition(
          +[](Slot* slot) { return !slot->paused || slot->killed; }, &s));
      if (s.killed) return {};
    }
    const uint64_t token = u64(2);
    const int64_t fenced = i64(3), unfenced = i64(4);
    const bool accepted = referee_.Write(req[1], token, fenced, unfenced);
    Event f = WorkerEvent(s, accepted ? EventType::kOk : EventType::kFail, Op::kWrite, req[1]);
    f.owner.clear();
    f.token = token;
    f.counter = Counter::kFenced;
    f.read = fenced - 1;
    f.wrote = fenced;
    if (!accepted) f.error = "STALE_TOKEN";
    history_->RecordNow(f);
    Event u = WorkerEvent(s, EventType::kOk, Op::kWrite, req[1]);
    u.owner.clear();
    u.token = token;
    u.counter = Counter::kUnfenced;
    u.read = unfenced - 1;
    u.wrote = unfenced;
    history_->RecordNow(u);
    return {"ok"};
  }
  if (what == "release" && req.size() == 3) {
    if (s.abandon) {
      RecordNemesis(s, Op::kAbandon);
      wanted_.push_back(s.task);
      s.state = Slot::State::kIdle;
      return {"abandon"};
    }
    s.state = Slot::State::kReleasing;
    // A client that was stopped cannot vouch for its lease after it
    // resumes (a session's stream may have ended unseen): no bound.
    std::optional<int64_t> bound;
    if (!s.paused_hold) bound = history_->LeaseBoundNs(SteadyPoint(i64(2)));
    s.paused_hold = false;
    RecordPerLock(s, EventType::kInvoke, Op::kRelease, [&](size_t i, Event& e) {
      e.token = i < s.tokens.size() ? s.tokens[i] : 0;
      e.valid_until_ns = bound;
    });
    return {"ok"};
  }
  if (what == "released" && req.size() >= 4) {
    s.state = Slot::State::kIdle;
    // OK: released; FAILED_PRECONDITION: the hold was not there (lost);
    // anything else: no answer, the hold ends with its lease.
    const EventType type = req[2] == "OK"                    ? EventType::kOk
                           : req[2] == "FAILED_PRECONDITION" ? EventType::kFail
                                                             : EventType::kInfo;
    RecordPerLock(s, type, Op::kRelease, [&](size_t, Event& e) {
      if (type != EventType::kOk) e.error = req[2];
    });
    return {"ok"};
  }
  err_ << "lockctl verify: worker " << process << " sent a malformed request \"" << what << "\"\n";
  return {};
}

void Run::Strike(Slot& s) {
  switch (o_.nemesis) {
    case NemesisKind::kKillHolders:
      s.killed = true;
      ::kill(s.pid, SIGKILL);
      RecordNemesis(s, Op::kKill);
      wanted_.push_back(s.task);
      s.state = Slot::State::kIdle;
      if (s.gone && !stopping_) respawn_.push_back(s.session);
      break;
    case NemesisKind::kAbandon:
      s.abandon = true;  // at its release (Handle)
      break;
    case NemesisKind::kPauseHolders:
      // At its next write (Handle), for past its lease: the lock goes to
      // others while its write is on the way.
      s.pause_at_write = true;
      break;
    case NemesisKind::kNone:
      break;
  }
}

void Run::NemesisLoop() {
  absl::MutexLock l(&mu_);
  nemesis_.Start(absl::Now());
  while (!done_) {
    mu_.AwaitWithTimeout(absl::Condition(&done_), absl::Milliseconds(20));
    const absl::Time now = absl::Now();
    for (auto& [process, s] : slots_) {
      if (s.paused && (now >= s.resume_at || stopping_)) {
        ::kill(s.pid, SIGCONT);
        s.paused = false;
      }
    }
    if (stopping_) continue;
    std::vector<int> candidates;
    for (auto& [process, s] : slots_) {
      if (s.gone || s.killed || s.abandon || s.paused || s.pause_at_write) continue;
      if (o_.nemesis == NemesisKind::kPauseHolders) {
        // A writer acquiring: it will stop at its write.
        if (s.state != Slot::State::kAcquiring || !TaskWrites(s.task)) continue;
      } else if (s.state != Slot::State::kHolding) {
        continue;
      }
      candidates.push_back(process);
    }
    if (std::optional<int> victim = nemesis_.Pick(now, candidates)) Strike(slots_[*victim]);
  }
}

int Run::Cleanup(Client& client) {
  int released = 0;
  ListOptions lo;
  lo.ns = o_.ns;
  lo.prefix = "verify/";
  const std::string mine = absl::StrCat(kOwnerPrefix, run_id_, "-");
  absl::StatusOr<ListPage> page = client.List(lo);
  while (page.ok()) {
    for (const LockInfo& lock : page->locks) {
      for (const Holder& h : lock.holders) {
        if (!absl::StartsWith(h.owner, mine)) continue;
        for (uint32_t i = 0; i < std::max<uint32_t>(h.hold_count, 1); ++i) {
          if (client.Release(lock.name, h.owner, o_.ns, h.fencing_token).ok()) ++released;
        }
      }
    }
    if (page->next_page_token.empty()) break;
    lo.page_token = page->next_page_token;
    page = client.List(lo);
  }
  if (!page.ok()) {
    err_ << "lockctl verify: cleanup could not list the namespace: " << page.status().message()
         << " (holds left end with their lease)\n";
  }
  return released;
}

void Run::PrintHeader(std::ostream& out) const {
  std::vector<std::string> workloads;
  for (Workload w : o_.workloads) workloads.push_back(WorkloadName(w));
  const char* api = o_.api == ApiMode::kSession ? "session"
                    : o_.api == ApiMode::kUnary ? "unary"
                                                : "both";
  out << "lockctl verify: " << o_.server << ", namespace " << o_.ns << ", "
      << absl::FormatDuration(o_.duration) << ", " << o_.workers << " workers, workloads "
      << absl::StrJoin(workloads, ",") << ", api " << api << ", ttl "
      << absl::FormatDuration(o_.ttl) << ", nemesis " << NemesisName(o_.nemesis) << "\n";
}

int Run::Execute(std::ostream& out) {
  ::signal(SIGPIPE, SIG_IGN);
  binary_ = o_.worker_binary;
  if (binary_.empty()) {
    char path[4096];
    ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
    if (n <= 0) {
      err_ << "lockctl verify: cannot find its own binary for the workers\n";
      return kVerifyInternal;
    }
    binary_.assign(path, static_cast<size_t>(n));
  }
  if (!absl::StrContains(o_.server, ":///") && !absl::StartsWith(o_.server, "ipv4:") &&
      !absl::StartsWith(o_.server, "ipv6:") && !absl::StartsWith(o_.server, "unix:")) {
    replicas_ = absl::StrSplit(o_.server, ',', absl::SkipWhitespace());
  }
  ClientOptions co;
  co.owner = absl::StrCat(kOwnerPrefix, run_id_, "-runner");
  co.default_namespace = o_.ns;
  co.rpc_timeout = o_.rpc_timeout;
  co.use_sessions = false;
  absl::StatusOr<Client> client = Client::Connect(o_.server, co, o_.tls, o_.auth);
  if (!client.ok()) {
    err_ << "lockctl verify: " << client.status().message() << "\n";
    return kVerifyUsage;
  }
  if (!o_.force) {
    absl::Status pre = Preflight(*client);
    if (absl::IsFailedPrecondition(pre)) {
      err_ << "lockctl verify: " << pre.message() << "\n";
      return kVerifyUsage;
    }
    if (!pre.ok()) {
      err_ << "lockctl verify: cannot list namespace \"" << o_.ns << "\": " << pre.message()
           << "\n";
      return kVerifyUnavailable;
    }
  }
  if (!o_.history_file.empty()) {
    history_file_.open(o_.history_file, std::ios::out | std::ios::trunc);
    if (!history_file_) {
      err_ << "lockctl verify: cannot write --history " << o_.history_file << ": "
           << ::strerror(errno) << "\n";
      return kVerifyUsage;
    }
  }
  history_ = std::make_unique<HistoryRecorder>(history_file_.is_open() ? &history_file_ : nullptr);
  dev_null_ = ::open("/dev/null", O_WRONLY | O_CLOEXEC);

  const absl::Time start = absl::Now();
  const absl::Time deadline = start + o_.duration;
  const absl::Time hard_deadline = deadline + 2 * o_.ttl + absl::Seconds(10);
  for (int i = 0; i < o_.workers; ++i) {
    // Both: two session workers, two unary ones, ... (not every other one,
    // which would put all session workers on the same replicas of a list).
    bool session = o_.api == ApiMode::kSession || (o_.api == ApiMode::kBoth && i / 2 % 2 == 0);
    absl::Status s = Spawn(session);
    if (!s.ok()) {
      err_ << "lockctl verify: " << s.message() << "\n";
      absl::MutexLock l(&mu_);
      stopping_ = true;
      break;
    }
  }
  std::thread nemesis;
  if (o_.nemesis != NemesisKind::kNone) nemesis = std::thread([this] { NemesisLoop(); });

  // The run: replace struck workers until the deadline.
  while (true) {
    std::vector<bool> respawn;
    {
      absl::MutexLock l(&mu_);
      auto wake = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !respawn_.empty() || stopping_; };
      mu_.AwaitWithDeadline(absl::Condition(&wake), deadline);
      if (stopping_ || absl::Now() >= deadline) {
        stopping_ = true;
        break;
      }
      respawn.swap(respawn_);
    }
    for (bool session : respawn) {
      absl::Status s = Spawn(session);
      if (!s.ok()) err_ << "lockctl verify: " << s.message() << "\n";
    }
  }
  // The end: workers finish their task and stop; the time box kills the rest.
  {
    absl::MutexLock l(&mu_);
    auto all_gone = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& [p, s] : slots_) {
        if (!s.gone) return false;
      }
      return true;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&all_gone), hard_deadline)) {
      for (auto& [p, s] : slots_) {
        if (s.gone || s.killed) continue;
        err_ << "lockctl verify: worker " << p << " still running at the time box; killed\n";
        s.killed = true;
        ::kill(s.pid, SIGKILL);
        RecordNemesis(s, Op::kKill);
      }
    }
    done_ = true;
  }
  if (nemesis.joinable()) nemesis.join();
  for (auto& c : conns_) c->thread.join();
  {
    absl::MutexLock l(&mu_);
    for (auto& [p, s] : slots_) {
      int status;
      while (::waitpid(s.pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  if (dev_null_ >= 0) ::close(dev_null_);
  const int cleaned = Cleanup(*client);
  if (history_file_.is_open()) history_file_.flush();
  if (!history_->status().ok()) {
    err_ << "lockctl verify: --history " << o_.history_file << ": " << history_->status().message()
         << "\n";
  }

  CheckReport report = Check(history_->Events(), CheckConfig());
  if (o_.json) {
    PrintReportJson(report, out);
  } else {
    PrintHeader(out);
    PrintReportText(report, out);
    if (cleaned > 0) out << "cleanup: released " << cleaned << " holds left by struck workers\n";
  }
  return ExitCodeFor(report);
}

}  // namespace

int RunVerify(const VerifyOptions& options, std::ostream& out, std::ostream& err) {
  Run run(options, err);
  return run.Execute(out);
}

}  // namespace lockd::lockctl::verify
