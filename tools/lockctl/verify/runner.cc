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
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "tools/lockctl/verify/history_sink.h"
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

absl::StatusOr<Api> ParseApi(absl::string_view text) {
  if (text == "session") return Api::kSession;
  if (text == "unary") return Api::kUnary;
  if (text == "both") return Api::kBoth;
  return absl::InvalidArgumentError(
      absl::StrCat("--api must be session, unary or both, not \"", text, "\""));
}

namespace {

// The lock names of each workload (all under "verify/").
constexpr int kMutexLocks = 2;
constexpr int kAllLocks = 3;  // acquire-all takes 2 of these 3
constexpr uint32_t kSemaphoreLimit = 3;
constexpr char kOwnerPrefix[] = "lockd-verify-";

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One worker process, as the runner sees it.
struct Slot {
  enum class State { kIdle, kAcquiring, kHolding, kReleasing };
  int process = 0;  // history process number (a replacement gets a new one)
  pid_t pid = -1;
  bool session = true;
  State state = State::kIdle;
  Op op;                         // the current op (kAcquiring .. kReleasing)
  std::vector<uint64_t> tokens;  // of op's locks, once granted
  std::set<std::string> inside;  // names it entered and has not exited
  bool read_done = false;        // read the referee, not yet written (pause target)
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
  Op NextOp() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NemesisLoop();
  void Strike(Slot& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records what a worker that died (killed, or its pipe broke) left: its
  // pending op as info, its referee presence as ended.
  void Bury(Slot& s, const char* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int Cleanup(Client& client);

  const VerifyOptions o_;
  std::ostream& err_;
  const std::string run_id_;
  std::string binary_;
  int dev_null_ = -1;
  Referee referee_;

  absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  NemesisPolicy nemesis_ ABSL_GUARDED_BY(mu_);
  HistorySink history_ ABSL_GUARDED_BY(mu_);
  std::map<int, Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> respawn_ ABSL_GUARDED_BY(mu_);  // session flags of workers to replace
  int next_process_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_op_ ABSL_GUARDED_BY(mu_) = 0;
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
    // Async-signal-safe calls only until exec.
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
  c.server = o_.server;
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
  if (!s.killed) Bury(s, s.abandon ? "abandoned" : "exited");
  if ((s.killed || s.abandon) && !stopping_) respawn_.push_back(s.session);
}

void Run::Bury(Slot& s, const char* why) {
  const int64_t now = NowNs();
  for (const std::string& name : s.inside) history_.Exit(now, s.process, name, /*crashed=*/true);
  s.inside.clear();
  if (s.state == Slot::State::kAcquiring) {
    history_.AcquireInfo(now, s.process, s.op.id, why);
  } else if (s.state == Slot::State::kReleasing) {
    history_.ReleaseInfo(now, s.process, s.op.id, why);
  }
  s.state = Slot::State::kIdle;
}

Op Run::NextOp() {
  Op op;
  op.id = ++next_op_;
  const int64_t hold_us = absl::ToInt64Microseconds(o_.hold);
  op.hold = absl::Microseconds(
      std::uniform_int_distribution<int64_t>(std::max<int64_t>(hold_us / 10, 1), hold_us)(rng_));
  Workload w =
      o_.workloads[std::uniform_int_distribution<size_t>(0, o_.workloads.size() - 1)(rng_)];
  std::uniform_real_distribution<double> coin(0, 1);
  switch (w) {
    case Workload::kMutex:
      op.kind = OpKind::kLock;
      op.locks.push_back({absl::StrCat("verify/mutex/", std::uniform_int_distribution<int>(
                                                            0, kMutexLocks - 1)(rng_)),
                          0, 0});
      break;
    case Workload::kRw:
      op.kind = coin(rng_) < 0.9 ? OpKind::kShared : OpKind::kLock;
      op.locks.push_back({"verify/rw", 0, 0});
      break;
    case Workload::kSemaphore:
      op.kind = OpKind::kSemaphore;
      op.locks.push_back({"verify/semaphore", kSemaphoreLimit, coin(rng_) < 0.7 ? 1u : 2u});
      break;
    case Workload::kAcquireAll: {
      op.kind = OpKind::kAll;
      std::vector<int> names = {0, 1, 2};
      std::shuffle(names.begin(), names.end(), rng_);
      for (int i = 0; i < 2; ++i) op.locks.push_back({absl::StrCat("verify/all/", names[i]), 0, 0});
      break;
    }
  }
  return op;
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
  s.op = NextOp();
  s.state = Slot::State::kAcquiring;
  s.tokens.clear();
  history_.AcquireInvoke(NowNs(), s.process, s.op, s.session, o_.ttl);
  return EncodeOp(s.op);
}

std::vector<std::string> Run::Handle(int process, const std::vector<std::string>& req) {
  absl::MutexLock l(&mu_);
  Slot& s = slots_[process];
  if (s.killed || req.empty()) return {};
  const std::string& what = req[0];
  const int64_t now = NowNs();
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
  if (what == "granted" && req.size() >= 4) {
    for (size_t i = 4; i < req.size(); ++i) s.tokens.push_back(u64(i));
    s.state = Slot::State::kHolding;
    history_.AcquireOk(now, s.process, s.op.id, s.tokens, req[2] == "1", i64(3));
    return {"ok"};
  }
  if (what == "failed" && req.size() >= 5) {
    s.state = Slot::State::kIdle;
    history_.AcquireFail(now, s.process, s.op.id, req[2], req[3] == "1", req[4]);
    return {"ok"};
  }
  if (what == "enter" && req.size() >= 4) {
    s.inside.insert(req[1]);
    const OpLock* lock = nullptr;
    for (const OpLock& ol : s.op.locks) {
      if (ol.name == req[1]) lock = &ol;
    }
    history_.Enter(now, s.process, req[1], u64(2), s.op.kind, lock ? lock->limit : 0,
                   lock ? lock->permits : 0, i64(3));
    return {"ok"};
  }
  if (what == "read" && req.size() >= 3) {
    Referee::Counters c = referee_.Read(req[1], u64(2));
    s.read_done = true;
    history_.Read(now, s.process, req[1], u64(2), c.fenced, c.unfenced);
    return {"value", absl::StrCat(c.fenced), absl::StrCat(c.unfenced)};
  }
  if (what == "write" && req.size() >= 5) {
    bool accepted = referee_.Write(req[1], u64(2), i64(3), i64(4));
    s.read_done = false;
    history_.Write(now, s.process, req[1], u64(2), i64(3), i64(4), accepted);
    return {"ok"};
  }
  if (what == "exit" && req.size() >= 3) {
    s.inside.erase(req[1]);
    history_.Exit(now, s.process, req[1], /*crashed=*/false);
    return {"ok"};
  }
  if (what == "release" && req.size() >= 2) {
    if (s.abandon) {
      history_.Nemesis(now, "abandon", s.process, s.op);
      s.state = Slot::State::kIdle;
      return {"abandon"};
    }
    s.state = Slot::State::kReleasing;
    history_.ReleaseInvoke(now, s.process, s.op.id, s.op, s.tokens);
    return {"ok"};
  }
  if (what == "released" && req.size() >= 4) {
    s.state = Slot::State::kIdle;
    history_.ReleaseDone(now, s.process, s.op.id, req[2], req[3]);
    return {"ok"};
  }
  err_ << "lockctl verify: worker " << process << " sent an unknown request \"" << what << "\"\n";
  return {};
}

void Run::Strike(Slot& s) {
  const int64_t now = NowNs();
  switch (o_.nemesis) {
    case NemesisKind::kKillHolders:
      history_.Nemesis(now, "kill", s.process, s.op);
      s.killed = true;
      ::kill(s.pid, SIGKILL);
      Bury(s, "killed");
      if (!s.gone) break;
      if (!stopping_) respawn_.push_back(s.session);
      break;
    case NemesisKind::kAbandon:
      s.abandon = true;
      break;
    case NemesisKind::kPauseHolders:
      history_.Nemesis(now, "pause", s.process, s.op);
      ::kill(s.pid, SIGSTOP);
      s.paused = true;
      // Past the lease (and the unary client's validity), so that the lock
      // goes to another worker while this one still means to write.
      s.resume_at = absl::Now() + 2 * o_.ttl + absl::Milliseconds(500);
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
        history_.Nemesis(NowNs(), "resume", s.process, s.op);
        ::kill(s.pid, SIGCONT);
        s.paused = false;
      }
    }
    if (stopping_) continue;
    std::vector<int> candidates;
    for (auto& [process, s] : slots_) {
      if (s.gone || s.killed || s.abandon || s.paused || s.state != Slot::State::kHolding) continue;
      if (o_.nemesis == NemesisKind::kPauseHolders && !s.read_done) continue;
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
  return released;
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
  dev_null_ = ::open("/dev/null", O_WRONLY | O_CLOEXEC);

  const absl::Time start = absl::Now();
  const absl::Time deadline = start + o_.duration;
  const absl::Time hard_deadline = deadline + 2 * o_.ttl + absl::Seconds(10);
  {
    absl::MutexLock l(&mu_);
    history_.Start(NowNs(), o_);
  }
  for (int i = 0; i < o_.workers; ++i) {
    bool session = o_.api == Api::kSession || (o_.api == Api::kBoth && i % 2 == 0);
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
  // The end: workers finish their op and stop; the time box kills the rest.
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
        if (s.gone) continue;
        err_ << "lockctl verify: worker " << p << " still running at the time box; killed\n";
        s.killed = true;
        ::kill(s.pid, SIGKILL);
        Bury(s, "killed at the time box");
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

  absl::MutexLock l(&mu_);
  history_.Finish(NowNs(), referee_.Snapshot(), cleaned);
  if (!o_.history_file.empty()) {
    absl::Status w = history_.WriteTo(o_.history_file);
    if (!w.ok()) err_ << "lockctl verify: " << w.message() << "\n";
  }
  return history_.Report(o_.json, out);
}

}  // namespace

int RunVerify(const VerifyOptions& options, std::ostream& out, std::ostream& err) {
  Run run(options, err);
  return run.Execute(out);
}

}  // namespace lockd::lockctl::verify
