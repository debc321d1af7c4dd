// `lockctl run`: hold a lock while a command runs (the distributed flock).
//
// One thread (this one) owns the child: it sleeps in poll() on a self-pipe
// that receives a byte per signal (from the handlers) and a byte when the
// lease is lost (from the Client's session or watchdog thread), so every event is
// handled here, outside signal context.

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/lockctl/lockctl.h"

extern char** environ;

namespace lockd::lockctl {
namespace {

// Write end of the self-pipe; set before any handler is installed.
int g_wake_fd = -1;
// Byte written when the lease is lost (signal numbers are never 0).
constexpr unsigned char kLostByte = 0;
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

void Wake(unsigned char byte) {
  int saved = errno;
  ssize_t unused = ::write(g_wake_fd, &byte, 1);  // full pipe: a wake-up is pending anyway
  (void)unused;
  errno = saved;
}

void OnSignal(int sig) { Wake(static_cast<unsigned char>(sig)); }

void Install(int sig, void (*handler)(int), int flags) {
  struct sigaction sa = {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = flags;
  ::sigaction(sig, &sa, nullptr);
}

// Signals the command's process group (it is the group leader), or just the
// command if it moved to a group of its own.
void SignalCommand(pid_t pid, int sig) {
  if (::kill(-pid, sig) != 0) ::kill(pid, sig);
}

// Makes `pgrp` the terminal's foreground process group. SIGTTOU is blocked
// meanwhile: a background group may not otherwise change it. Async-signal-safe.
void GiveTerminalTo(pid_t pgrp) {
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  ::sigprocmask(SIG_BLOCK, &ttou, &old);
  ::tcsetpgrp(STDIN_FILENO, pgrp);
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
}

// The locks of `run`: --name with its kind, or every --lock with AcquireAll.
absl::StatusOr<LeaseSet> TakeLocks(const Invocation& inv, Client& client, AcquireOptions o) {
  if (inv.locks.empty()) {
    absl::StatusOr<Lease> lease = AcquireKind(inv, client, std::move(o));
    if (!lease.ok()) return lease.status();
    std::vector<Lease> one;
    one.push_back(*std::move(lease));
    return LeaseSet(std::move(one));
  }
  std::vector<LockSpec> specs;
  for (const std::string& name : inv.locks) {
    LockSpec spec;
    spec.name = name;
    spec.mode = inv.shared ? HoldMode::kShared : HoldMode::kExclusive;
    spec.limit = inv.semaphore_limit;
    spec.permits = inv.permits;
    specs.push_back(std::move(spec));
  }
  return client.AcquireAll(specs, std::move(o));
}

// Why a lease of `held` was lost (OK if none was).
absl::Status LostStatus(const LeaseSet& held) {
  for (const Lease& l : held) {
    absl::Status s = l.lost_status();
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return kExitError;
}

}  // namespace

int RunCommand(const Invocation& inv, Client& client, std::ostream& err) {
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    err << "lockctl: pipe: " << ::strerror(errno) << "\n";
    return kExitError;
  }
  g_wake_fd = wake[1];

  AcquireOptions o;
  o.ttl = inv.ttl;
  o.wait = inv.wait;
  o.auto_renew = true;
  o.on_lost = [](const absl::Status&) { Wake(kLostByte); };
  absl::StatusOr<LeaseSet> lease = TakeLocks(inv, client, std::move(o));
  if (!lease.ok()) {
    err << "lockctl: " << lease.status().message() << "\n";
    std::string undo = UndoCommand(inv, client.owner(), lease.status());
    if (!undo.empty()) err << "lockctl: to undo it: " << undo << "\n";
    return ExitCodeFor(lease.status(), /*acquiring=*/true);
  }
  std::vector<std::string> names, tokens;
  for (const Lease& l : *lease) {
    names.push_back(l.name());
    tokens.push_back(absl::StrCat(l.fencing_token()));
  }

  // Everything the child needs is built before fork(): after it, only
  // async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view kv(*e);
    if (absl::StartsWith(kv, "LOCKD_LOCK_NAME=") || absl::StartsWith(kv, "LOCKD_LOCK_OWNER=") ||
        absl::StartsWith(kv, "LOCKD_FENCING_TOKEN=")) {
      continue;
    }
    env_strings.emplace_back(kv);
  }
  env_strings.push_back(absl::StrCat("LOCKD_LOCK_NAME=", absl::StrJoin(names, ",")));
  env_strings.push_back(absl::StrCat("LOCKD_LOCK_OWNER=", (*lease)[0].owner()));
  env_strings.push_back(absl::StrCat("LOCKD_FENCING_TOKEN=", absl::StrJoin(tokens, ",")));
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = inv.argv;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  Install(SIGCHLD, OnSignal, SA_RESTART | SA_NOCLDSTOP);
  for (int sig : kForwarded) Install(sig, OnSignal, SA_RESTART);

  int exec_err[2];
  if (::pipe2(exec_err, O_CLOEXEC) != 0) {
    err << "lockctl: pipe: " << ::strerror(errno) << "\n";
    return kExitError;
  }
  const pid_t parent = ::getpid();
  // Run from an interactive terminal, the command's group becomes the
  // foreground group so that it can read the terminal and gets its ^C; both
  // sides set it (whichever runs first), as shells do.
  const bool take_terminal = ::isatty(STDIN_FILENO) && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
  const int death_signal = inv.signal;
  pid_t pid = ::fork();
  if (pid < 0) {
    err << "lockctl: fork: " << ::strerror(errno) << "\n";
    return kExitError;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    if (take_terminal) GiveTerminalTo(::getpid());
    // If lockctl dies, the lock is freed (session) or no longer renewed
    // (--unary): the command must stop too.
    ::prctl(PR_SET_PDEATHSIG, death_signal);
    if (::getppid() != parent) _exit(kExitLockLost);
    ::signal(SIGCHLD, SIG_DFL);
    for (int sig : kForwarded) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvpe(argv[0], argv.data(), envp.data());
    int e = errno;
    ssize_t unused = ::write(exec_err[1], &e, sizeof(e));
    (void)unused;
    _exit(e == ENOENT ? kExitNotFound : kExitCannotExecute);
  }
  ::setpgid(pid, pid);  // also done by the child; whichever runs first wins
  if (take_terminal) GiveTerminalTo(pid);
  ::close(exec_err[1]);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_err[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  ::close(exec_err[0]);
  if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (take_terminal) GiveTerminalTo(::getpgrp());
    err << "lockctl: cannot run \"" << inv.argv[0] << "\": " << ::strerror(exec_errno) << "\n";
    lease->Release().IgnoreError();
    return exec_errno == ENOENT ? kExitNotFound : kExitCannotExecute;
  }

  using Clock = std::chrono::steady_clock;
  bool lost = false;
  bool kill_pending = false;  // a SIGKILL is due at kill_at
  Clock::time_point kill_at{};
  int wait_status = 0;
  while (true) {
    pid_t r = ::waitpid(pid, &wait_status, WNOHANG);
    if (r == pid) break;
    int timeout_ms = -1;
    if (kill_pending) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(kill_at - Clock::now());
      timeout_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    struct pollfd pfd = {wake[0], POLLIN, 0};
    int pr = ::poll(&pfd, 1, timeout_ms);
    if (pr < 0 && errno != EINTR) {
      err << "lockctl: poll: " << ::strerror(errno) << "\n";
      SignalCommand(pid, SIGKILL);
    }
    if (kill_pending && Clock::now() >= kill_at) {
      err << "lockctl: command still running " << absl::FormatDuration(inv.kill_after)
          << " after the signal; sending SIGKILL\n";
      SignalCommand(pid, SIGKILL);
      kill_pending = false;
    }
    unsigned char bytes[64];
    ssize_t got;
    while ((got = ::read(wake[0], bytes, sizeof(bytes))) > 0) {
      for (ssize_t i = 0; i < got; ++i) {
        int b = bytes[i];
        if (b == kLostByte) {
          if (lost) continue;
          lost = true;
          err << "lockctl: " << LostStatus(*lease).message() << "; sending "
              << "SIG" << ::sigabbrev_np(inv.signal) << " to the command\n";
          SignalCommand(pid, inv.signal);
          if (inv.kill_after > absl::ZeroDuration()) {
            kill_pending = true;
            kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         absl::ToChronoNanoseconds(inv.kill_after));
          }
        } else if (b != SIGCHLD) {
          SignalCommand(pid, b);  // forward INT, TERM, HUP, QUIT
        }
      }
    }
  }

  if (take_terminal) GiveTerminalTo(::getpgrp());
  const int code = ExitCodeOf(wait_status);
  if (lost || lease->lost()) {
    if (!lost) {
      err << "lockctl: " << LostStatus(*lease).message()
          << " (noticed as the command ended; it may have run without the lock)\n";
    }
    lease->Release().IgnoreError();  // reports the loss; sends nothing
    return kExitLockLost;
  }
  absl::Status released = lease->Release();
  if (IsLockLost(released)) {
    err << "lockctl: " << released.message() << " (the command may have run without the lock)\n";
    return kExitLockLost;
  }
  if (!released.ok()) {
    err << "lockctl: warning: could not release the lock; it ends with its lease: "
        << released.message() << "\n";
  }
  return code;
}

}  // namespace lockd::lockctl
