#include "backends/redis/command_pool.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/backend.h"
#include "backends/common/coalescing_scope.h"
#include "backends/redis/cluster_slots.h"
#include "util/log.h"

namespace lockd::redis {
namespace {

// Appends one bulk string of the Redis protocol (RESP) to `out`.
void AppendBulk(absl::string_view arg, std::string* out) {
  absl::StrAppend(out, "$", arg.size(), "\r\n", arg, "\r\n");
}

// Appends `cmd` in the Redis protocol to `out` (EVALSHA, or EVAL when `eval`,
// for a script). Written here rather than by hiredis's
// redisFormatCommandArgv, whose sprintf per argument was a tenth of lockd's
// instructions per contended critical section on redis.
void FormatCommand(const Command& cmd, bool eval, std::string* out) {
  const size_t argc = cmd.args.size() + (cmd.script != nullptr ? 3 : 0);
  absl::StrAppend(out, "*", argc, "\r\n");
  if (cmd.script != nullptr) {
    AppendBulk(eval ? "EVAL" : "EVALSHA", out);
    AppendBulk(eval ? cmd.script->body : cmd.script->sha, out);
    AppendBulk(absl::StrCat(cmd.num_keys), out);
  }
  for (const std::string& a : cmd.args) AppendBulk(a, out);
}

// Sends all of `data` on the blocking socket `fd` (whose send timeout is the
// command timeout). Returns the number of bytes sent: data.size() on success.
size_t SendAll(int fd, absl::string_view data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  return sent;
}

void Deliver(const redisContext* c, Command& cmd, ReplyPtr r) {
  if (r->type == REDIS_REPLY_ERROR) {
    std::move(cmd.done)(RedisError(cmd.context, c, r.get()));
  } else {
    std::move(cmd.done)(std::move(r));
  }
}

}  // namespace

CommandPool::CommandPool(ConnectionOptions options, std::vector<Script*> scripts, int size,
                         absl::Duration backoff_min, absl::Duration backoff_max)
    : options_(std::move(options)),
      scripts_(std::move(scripts)),
      backoff_min_(backoff_min),
      backoff_max_(backoff_max) {
  stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  for (int i = 0; i < size; ++i) connections_.push_back(std::make_unique<Connection>());
  for (int i = 0; i < size; ++i) {
    threads_.emplace_back([this, i] { Run(static_cast<size_t>(i)); });
  }
}

CommandPool::~CommandPool() {
  Stop();
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

absl::Status CommandPool::Submit(Command& cmd) {
  Command* cmds[] = {&cmd};
  return Write(cmds, 1);
}

absl::Status CommandPool::Submit(Command& cmd, Command& then) {
  Command* cmds[] = {&cmd, &then};
  return Write(cmds, 2);
}

absl::Status CommandPool::SubmitAll(std::vector<Command>& cmds) {
  if (cmds.empty()) return absl::OkStatus();
  std::vector<Command*> ptrs;
  ptrs.reserve(cmds.size());
  for (Command& c : cmds) ptrs.push_back(&c);
  return Write(ptrs.data(), ptrs.size());
}

// The commands held back for this pool in one CoalescingScope; written in
// one write when the scope closes, or failed with the reason they could not.
class CommandPool::HeldBack final : public CoalescingScope::Pending {
 public:
  explicit HeldBack(CommandPool* pool) : pool_(pool) {}
  void Send() override {
    std::vector<Command*> ptrs;
    ptrs.reserve(cmds_.size());
    for (Command& c : cmds_) ptrs.push_back(&c);
    absl::Status sent = pool_->WriteNow(ptrs.data(), ptrs.size());
    if (sent.ok()) return;
    for (Command& c : cmds_) std::move(c.done)(sent);
  }
  // False when full: the commands are then written at once.
  bool Hold(Command* const* cmds, size_t count) {
    if (cmds_.size() + count > kMaxHeldBack) return false;
    for (size_t i = 0; i < count; ++i) cmds_.push_back(std::move(*cmds[i]));
    return true;
  }

 private:
  CommandPool* const pool_;
  std::vector<Command> cmds_;
};

absl::Status CommandPool::Write(Command* const* cmds, size_t count) {
  CoalescingScope* scope = CoalescingScope::Current();
  if (scope == nullptr) return WriteNow(cmds, count);
  {
    absl::MutexLock l(&mu_);
    if (stop_) return ShuttingDownError();
    // Refused at once when no connection is up, as a command sent now is.
    if (connected_ == 0) return WriteNow(cmds, count);
  }
  auto* held = static_cast<HeldBack*>(scope->Find(this));
  if (held == nullptr) {
    held = static_cast<HeldBack*>(scope->Add(this, std::make_unique<HeldBack>(this)));
  }
  if (held->Hold(cmds, count)) return absl::OkStatus();
  return WriteNow(cmds, count);
}

absl::Status CommandPool::WriteNow(Command* const* cmds, size_t count) {
  const Command& cmd = *cmds[0];
  // Built only when returned: the message is no work for the common case.
  auto unreachable = [this, &cmd] {
    absl::MutexLock l(&mu_);
    if (stop_) return ShuttingDownError();
    // last_error_ is OK when the connections were dropped a moment ago and
    // their threads have not yet recorded why.
    absl::string_view why =
        last_error_.ok() ? absl::string_view("no open connection") : last_error_.message();
    return absl::UnavailableError(absl::StrCat(cmd.context, ": redis is unreachable (", why, ")"));
  };
  bool up;
  {
    absl::MutexLock l(&mu_);
    if (stop_) return ShuttingDownError();
    up = connected_ > 0;
  }
  if (!up) return unreachable();
  std::string data;
  for (size_t i = 0; i < count; ++i) FormatCommand(*cmds[i], /*eval=*/false, &data);
  const absl::Time deadline = absl::Now() + options_.command_timeout;
  const size_t n = connections_.size();
  const size_t first = next_connection_.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < n; ++i) {
    Connection& conn = *connections_[(first + i) % n];
    absl::MutexLock l(&conn.mu);
    if (conn.closed) continue;
    size_t sent = SendAll(conn.fd, data);
    if (sent != data.size()) {
      // Nothing more may go on this connection; its thread sees the
      // shutdown, fails what awaits replies there, and reconnects.
      conn.closed = true;
      ::shutdown(conn.fd, SHUT_RDWR);
      // Part of the command went out and may yet run: it must not be sent
      // again elsewhere. Nothing went out: another connection may take it.
      if (sent > 0) return unreachable();
      continue;
    }
    for (size_t k = 0; k < count; ++k) conn.awaiting.push_back(Sent{std::move(*cmds[k]), deadline});
    return absl::OkStatus();
  }
  return unreachable();
}

void CommandPool::ResetConnections() {
  for (const std::unique_ptr<Connection>& conn : connections_) {
    absl::MutexLock l(&conn->mu);
    if (conn->closed) continue;
    conn->closed = true;
    ::shutdown(conn->fd, SHUT_RDWR);
  }
}

int CommandPool::connected() const {
  absl::MutexLock l(&mu_);
  return connected_;
}

absl::Status CommandPool::last_error() const {
  absl::MutexLock l(&mu_);
  return last_error_;
}

bool CommandPool::AllConnectedOrStopped() const {
  return stop_ || connected_ == static_cast<int>(threads_.size());
}

bool CommandPool::WaitAllConnected(absl::Duration timeout) const {
  absl::MutexLock l(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(this, &CommandPool::AllConnectedOrStopped), timeout);
  return !stop_ && connected_ == static_cast<int>(threads_.size());
}

void CommandPool::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    state_cv_.SignalAll();
  }
  // Writes that passed the stop_ check before it was set may still land;
  // the threads deliver their replies before they exit.
  for (const std::unique_ptr<Connection>& conn : connections_) {
    absl::MutexLock l(&conn->mu);
    conn->closed = true;
  }
  stopping_.store(true);
  uint64_t one = 1;
  ssize_t unused = ::write(stop_fd_, &one, sizeof(one));
  (void)unused;
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void CommandPool::ConnectionLost(const absl::Status& why) {
  absl::MutexLock l(&mu_);
  --connected_;
  last_error_ = why;
  if (connected_ == 0 && !outage_logged_ && !stop_) {
    LogWarning("redis: command connections lost (", why.message(), "); reconnecting");
    outage_logged_ = true;
  }
}

void CommandPool::Run(size_t index) {
  BlockSigpipeOnThisThread();
  Connection& conn = *connections_[index];
  absl::Duration backoff = backoff_min_;
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
    }
    size_t address = next_address_.load(std::memory_order_relaxed);
    // Connect re-loads the scripts: a restarted server has none (EVALSHA
    // falls back to EVAL anyway if they vanish later).
    absl::StatusOr<ContextPtr> c = Connect(options_, scripts_, &address);
    if (!c.ok()) {
      {
        absl::MutexLock l(&mu_);
        last_error_ = c.status();
        if (!outage_logged_ && connected_ == 0 && !stop_) {
          LogWarning("redis: cannot connect (", c.status().message(), "); retrying with backoff");
          outage_logged_ = true;
        }
        absl::Time until = absl::Now() + Jitter(backoff);
        while (!stop_ && !state_cv_.WaitWithDeadline(&mu_, until)) {
        }
        if (stop_) return;
      }
      // Try the next address next time.
      next_address_.store((address + 1) % options_.addresses.size(), std::memory_order_relaxed);
      backoff = std::min(backoff * 2, backoff_max_);
      continue;
    }
    next_address_.store(address, std::memory_order_relaxed);
    ContextPtr ctx = *std::move(c);
    backoff = backoff_min_;
    {
      // Open for writes before it is counted: whoever sees connected_ > 0
      // (Write, Health) must find a connection it can use.
      absl::MutexLock l(&conn.mu);
      conn.fd = ctx->fd;
      conn.closed = false;
    }
    {
      absl::MutexLock l(&mu_);
      if (connected_++ == 0 && outage_logged_ && !stop_) {
        LogInfo("redis: command connections restored (", Where(options_.addresses[address]), ")");
        outage_logged_ = false;
      }
      last_error_ = absl::OkStatus();
      state_cv_.SignalAll();
    }
    absl::Status why = Serve(conn, ctx.get());
    std::deque<Sent> lost;
    {
      // After this no writer can reach the socket, so it may be closed.
      absl::MutexLock l(&conn.mu);
      conn.closed = true;
      conn.fd = -1;
      lost.swap(conn.awaiting);
    }
    ctx.reset();
    for (Sent& s : lost) {
      std::move(s.cmd.done)(
          absl::UnavailableError(absl::StrCat(s.cmd.context, ": ", why.message())));
    }
    ConnectionLost(why.ok() ? ShuttingDownError() : why);
  }
}

absl::Status CommandPool::Serve(Connection& conn, redisContext* ctx) {
  while (true) {
    absl::Duration wait = options_.command_timeout;
    {
      absl::MutexLock l(&conn.mu);
      if (!conn.awaiting.empty()) {
        wait = conn.awaiting.front().deadline - absl::Now();
        if (wait <= absl::ZeroDuration()) {
          return absl::UnavailableError(absl::StrCat("redis timed out", ServerOf(ctx)));
        }
      } else if (stopping_.load()) {
        return absl::OkStatus();
      } else if (conn.closed) {
        return absl::UnavailableError(absl::StrCat("redis connection reset", ServerOf(ctx)));
      }
    }
    // Once stopping, only the replies still awaited are waited for.
    pollfd fds[2] = {{ctx->fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    int ms = static_cast<int>(absl::ToInt64Milliseconds(wait)) + 1;
    int ready = ::poll(fds, stopping_.load() ? 1 : 2, ms);
    if (ready < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat("redis connection failed: poll: ", errno));
    }
    if (ready <= 0 || (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) == 0) continue;
    if (redisBufferRead(ctx) != REDIS_OK) {
      return absl::UnavailableError(ConnectionFailure(ctx));
    }
    absl::Status drop;
    while (true) {
      void* raw = nullptr;
      if (redisGetReplyFromReader(ctx, &raw) != REDIS_OK) {
        return absl::UnavailableError(ConnectionFailure(ctx));
      }
      if (raw == nullptr) break;
      ReplyPtr r(static_cast<redisReply*>(raw));
      Sent s;
      bool resent = false;
      {
        absl::MutexLock l(&conn.mu);
        if (conn.awaiting.empty()) {
          return absl::InternalError(
              absl::StrCat("redis sent a reply nobody asked for", ServerOf(ctx)));
        }
        s = std::move(conn.awaiting.front());
        conn.awaiting.pop_front();
        if (s.cmd.script != nullptr && !s.eval && IsNoScript(r.get())) {
          // Nothing ran: the script cache was flushed (a restart or SCRIPT
          // FLUSH). EVAL sends the body, which also caches it again.
          std::string data;
          FormatCommand(s.cmd, /*eval=*/true, &data);
          if (!conn.closed && SendAll(conn.fd, data) == data.size()) {
            s.eval = true;
            s.deadline = absl::Now() + options_.command_timeout;
            conn.awaiting.push_back(std::move(s));
            resent = true;
          } else {
            // Fails with the rest of what awaits replies here.
            conn.awaiting.push_front(std::move(s));
            return absl::UnavailableError("redis connection failed while resending a script");
          }
        }
      }
      if (resent) continue;
      if (s.cmd.redirect != nullptr && IsClusterRedirect(r.get())) {
        RedirectHandler* handler = s.cmd.redirect;
        handler->OnRedirect(std::move(s.cmd), std::move(r));
        continue;
      }
      if (IsConnectionError(r.get())) drop = RedisError("command connection", ctx, r.get());
      Deliver(ctx, s.cmd, std::move(r));
    }
    if (!drop.ok()) return drop;
  }
}

}  // namespace lockd::redis
