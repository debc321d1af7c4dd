#include "backends/redis/redis_client.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "backends/backend.h"
#include "backends/common/log.h"

namespace lockd::redis {
namespace {

// Channels per SUBSCRIBE/UNSUBSCRIBE command.
constexpr size_t kMaxChannelsPerCommand = 256;

timeval TimevalOf(absl::Duration d) {
  if (d <= absl::ZeroDuration()) d = absl::Milliseconds(1);
  timeval tv = absl::ToTimeval(d);
  return tv;
}

absl::string_view ReplyText(const redisReply* r) {
  return r->str == nullptr ? absl::string_view() : absl::string_view(r->str, r->len);
}

std::string Where(const Endpoint& e) { return absl::StrCat("redis ", e.host, ":", e.port); }

// Writes to a socket the server has closed raise SIGPIPE, which would kill
// the process unless it is ignored; hiredis 0.14 uses plain write(2). The
// signal is synchronous (sent to the writing thread), so blocking it on the
// threads that write is enough: the write then fails with EPIPE.
void BlockSigpipeOnThisThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// For Connect() on callers' threads, which may not block SIGPIPE: blocks it
// for the scope and swallows one raised meanwhile.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~ScopedSigpipeBlock() {
    if (sigismember(&old_, SIGPIPE) == 1) return;  // the caller blocks it itself
    sigset_t pending;
    sigemptyset(&pending);
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGPIPE);
      timespec zero{0, 0};
      sigtimedwait(&set, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t old_;
};

ReplyPtr Call(redisContext* c, std::initializer_list<absl::string_view> args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (absl::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return ReplyPtr(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

// Redis error replies whose first word says "try again later".
bool IsRetryableErrorCode(absl::string_view code) {
  static constexpr absl::string_view kCodes[] = {
      "LOADING", "BUSY",   "READONLY",  "MASTERDOWN", "TRYAGAIN",   "CLUSTERDOWN", "MOVED",
      "ASK",     "NOAUTH", "WRONGPASS", "OOM",        "NOREPLICAS", "EXECABORT"};
  for (absl::string_view c : kCodes) {
    if (code == c) return true;
  }
  return false;
}

absl::string_view ErrorCode(const redisReply* r) {
  absl::string_view text = ReplyText(r);
  return text.substr(0, text.find(' '));
}

bool IsNoScript(const redisReply* r) {
  return r->type == REDIS_REPLY_ERROR && ErrorCode(r) == "NOSCRIPT";
}

std::string Scrub(absl::string_view text, absl::string_view secret) {
  if (secret.empty()) return std::string(text);
  return absl::StrReplaceAll(text, {{secret, "<redacted>"}});
}

absl::StatusOr<ContextPtr> ConnectOne(const ConnectionOptions& o, const Endpoint& ep,
                                      const std::vector<Script*>& scripts) {
  const std::string where = Where(ep);
  ContextPtr c(redisConnectWithTimeout(ep.host.c_str(), ep.port, TimevalOf(o.connect_timeout)));
  if (c == nullptr) return absl::UnavailableError(absl::StrCat(where, ": cannot allocate"));
  if (c->err != 0) {
    return absl::UnavailableError(absl::StrCat(where, ": cannot connect: ", c->errstr));
  }
  if (redisSetTimeout(c.get(), TimevalOf(o.command_timeout)) != REDIS_OK ||
      redisEnableKeepAlive(c.get()) != REDIS_OK) {
    return absl::UnavailableError(absl::StrCat(where, ": cannot set socket options: ", c->errstr));
  }
  if (!o.password.empty()) {
    ReplyPtr r = o.username.empty() ? Call(c.get(), {"AUTH", o.password})
                                    : Call(c.get(), {"AUTH", o.username, o.password});
    if (r == nullptr) return RedisError(absl::StrCat(where, ": AUTH"), c.get(), nullptr);
    if (r->type == REDIS_REPLY_ERROR) {
      return absl::UnauthenticatedError(
          absl::StrCat(where, ": authentication failed: ", Scrub(ReplyText(r.get()), o.password)));
    }
  }
  if (o.db != 0) {
    std::string db = absl::StrCat(o.db);
    ReplyPtr r = Call(c.get(), {"SELECT", db});
    if (r == nullptr) return RedisError(absl::StrCat(where, ": SELECT"), c.get(), nullptr);
    if (r->type == REDIS_REPLY_ERROR) {
      if (ErrorCode(r.get()) == "NOAUTH") {
        return absl::UnauthenticatedError(absl::StrCat(
            where, ": authentication failed: the server requires a password (redis.password)"));
      }
      return absl::InvalidArgumentError(
          absl::StrCat("redis.db: ", where, " refused SELECT ", o.db, ": ", ReplyText(r.get())));
    }
  }
  ReplyPtr pong = Call(c.get(), {"PING"});
  if (pong == nullptr) return RedisError(absl::StrCat(where, ": PING"), c.get(), nullptr);
  if (pong->type == REDIS_REPLY_ERROR) {
    if (ErrorCode(pong.get()) == "NOAUTH") {
      return absl::UnauthenticatedError(absl::StrCat(
          where, ": authentication failed: the server requires a password (redis.password)"));
    }
    return RedisError(absl::StrCat(where, ": PING"), c.get(), pong.get());
  }
  for (Script* s : scripts) {
    ReplyPtr r = Call(c.get(), {"SCRIPT", "LOAD", s->body});
    std::string context = absl::StrCat(where, ": SCRIPT LOAD ", s->name);
    if (r == nullptr || r->type == REDIS_REPLY_ERROR) return RedisError(context, c.get(), r.get());
    if (r->type != REDIS_REPLY_STRING) return RedisError(context, c.get(), r.get());
    absl::string_view sha = ReplyText(r.get());
    if (s->sha.empty()) {
      s->sha = std::string(sha);
    } else if (s->sha != sha) {
      return absl::InternalError(absl::StrCat(context, ": unexpected sha ", sha));
    }
  }
  return c;
}

// Appends `cmd` in the Redis protocol to `out` (EVALSHA, or EVAL when `eval`,
// for a script). False only when out of memory.
bool FormatCommand(const Command& cmd, bool eval, std::string* out) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  std::string num_keys;
  argv.reserve(cmd.args.size() + 3);
  lens.reserve(cmd.args.size() + 3);
  if (cmd.script != nullptr) {
    num_keys = absl::StrCat(cmd.num_keys);
    if (eval) {
      argv.push_back("EVAL");
      lens.push_back(4);
      argv.push_back(cmd.script->body.data());
      lens.push_back(cmd.script->body.size());
    } else {
      argv.push_back("EVALSHA");
      lens.push_back(7);
      argv.push_back(cmd.script->sha.data());
      lens.push_back(cmd.script->sha.size());
    }
    argv.push_back(num_keys.data());
    lens.push_back(num_keys.size());
  }
  for (const std::string& a : cmd.args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  char* buf = nullptr;
  int n = redisFormatCommandArgv(&buf, static_cast<int>(argv.size()), argv.data(), lens.data());
  if (n < 0) return false;
  out->append(buf, static_cast<size_t>(n));
  redisFreeCommand(buf);
  return true;
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

// " (host:port)" of `c`'s server; empty if unknown.
std::string ServerOf(const redisContext* c) {
  if (c == nullptr || c->tcp.host == nullptr) return "";
  return absl::StrCat(" (", c->tcp.host, ":", c->tcp.port, ")");
}

// "redis timed out (host:port)" and the like: why `c`'s connection failed.
std::string ConnectionFailure(const redisContext* c) {
  std::string why = "connection failed";
  if (c != nullptr && c->err != 0) {
    absl::string_view err(c->errstr);
    if (c->err == REDIS_ERR_IO && (absl::StrContains(err, "temporarily unavailable") ||
                                   absl::StrContains(err, "timed out"))) {
      why = "timed out";
    } else if (c->err == REDIS_ERR_EOF) {
      why = "connection closed by the server";
    } else {
      why = absl::StrCat("connection failed: ", err);
    }
  }
  return absl::StrCat("redis ", why, ServerOf(c));
}

void Deliver(const redisContext* c, Command& cmd, ReplyPtr r) {
  if (r->type == REDIS_REPLY_ERROR) {
    std::move(cmd.done)(RedisError(cmd.context, c, r.get()));
  } else {
    std::move(cmd.done)(std::move(r));
  }
}

absl::Duration Jitter(absl::Duration d) {
  thread_local absl::BitGen gen;
  return d * absl::Uniform(gen, 0.5, 1.0);
}

}  // namespace

absl::Status RedisError(absl::string_view context, const redisContext* c, const redisReply* reply) {
  if (reply == nullptr) {
    return absl::UnavailableError(absl::StrCat(context, ": ", ConnectionFailure(c)));
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    absl::string_view text = ReplyText(reply);
    if (IsRetryableErrorCode(ErrorCode(reply))) {
      return absl::UnavailableError(absl::StrCat(context, ": redis: ", text));
    }
    return absl::InternalError(absl::StrCat(context, ": redis: ", text));
  }
  return absl::InternalError(
      absl::StrCat(context, ": unexpected redis reply (type ", reply->type, ")"));
}

bool IsConnectionError(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ERROR) return false;
  absl::string_view code = ErrorCode(reply);
  return code == "READONLY" || code == "LOADING" || code == "MASTERDOWN" || code == "NOAUTH";
}

absl::StatusOr<std::vector<Endpoint>> ParseAddresses(absl::string_view text) {
  std::vector<Endpoint> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    size_t colon = part.rfind(':');
    Endpoint e;
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(part.substr(colon + 1), &port) || port <= 0 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis.addresses: expected host:port, got \"", part, "\""));
    }
    absl::string_view host = part.substr(0, colon);
    if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis.addresses: expected [ipv6]:port, got \"", part, "\""));
    }
    e.host = std::string(host);
    e.port = port;
    out.push_back(std::move(e));
  }
  if (out.empty()) return absl::InvalidArgumentError("redis.addresses: must not be empty");
  return out;
}

absl::StatusOr<ContextPtr> Connect(const ConnectionOptions& options,
                                   const std::vector<Script*>& scripts, size_t* next_address) {
  const size_t n = options.addresses.size();
  if (n == 0) return absl::InvalidArgumentError("redis.addresses: must not be empty");
  ScopedSigpipeBlock no_sigpipe;
  absl::Status first_error;
  for (size_t i = 0; i < n; ++i) {
    size_t index = (*next_address + i) % n;
    absl::StatusOr<ContextPtr> c = ConnectOne(options, options.addresses[index], scripts);
    if (c.ok()) {
      *next_address = index;
      return c;
    }
    // Bad credentials or options say more than "the next one is down too".
    if (first_error.ok() || (first_error.code() == absl::StatusCode::kUnavailable &&
                             c.status().code() != absl::StatusCode::kUnavailable)) {
      first_error = c.status();
    }
  }
  return first_error;
}

// --- CommandPool ---------------------------------------------------------

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

absl::Status CommandPool::Submit(Command& cmd) { return Write(cmd, nullptr); }

absl::Status CommandPool::Submit(Command& cmd, Command& then) { return Write(cmd, &then); }

absl::Status CommandPool::Write(Command& cmd, Command* then) {
  // Built only when returned: the message is no work for the common case.
  auto unreachable = [this, &cmd] {
    absl::MutexLock l(&mu_);
    if (stop_) return ShuttingDownError();
    return absl::UnavailableError(
        absl::StrCat(cmd.context, ": redis is unreachable (", last_error_.message(), ")"));
  };
  bool up;
  {
    absl::MutexLock l(&mu_);
    if (stop_) return ShuttingDownError();
    up = connected_ > 0;
  }
  if (!up) return unreachable();
  std::string data;
  if (!FormatCommand(cmd, /*eval=*/false, &data) ||
      (then != nullptr && !FormatCommand(*then, /*eval=*/false, &data))) {
    return absl::ResourceExhaustedError(absl::StrCat(cmd.context, ": out of memory"));
  }
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
    conn.awaiting.push_back(Sent{std::move(cmd), deadline});
    if (then != nullptr) conn.awaiting.push_back(Sent{std::move(*then), deadline});
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
      absl::MutexLock l(&mu_);
      if (stop_) return;
      if (connected_++ == 0 && outage_logged_) {
        LogInfo("redis: command connections restored (", Where(options_.addresses[address]), ")");
        outage_logged_ = false;
      }
      last_error_ = absl::OkStatus();
      state_cv_.SignalAll();
    }
    {
      absl::MutexLock l(&conn.mu);
      conn.fd = ctx->fd;
      conn.closed = false;
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
          if (!conn.closed && FormatCommand(s.cmd, /*eval=*/true, &data) &&
              SendAll(conn.fd, data) == data.size()) {
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
      if (IsConnectionError(r.get())) drop = RedisError("command connection", ctx, r.get());
      Deliver(ctx, s.cmd, std::move(r));
    }
    if (!drop.ok()) return drop;
  }
}

// --- Subscriber ------------------------------------------------------------

Subscriber::Subscriber(ConnectionOptions options, Listener* listener, absl::Duration backoff_min,
                       absl::Duration backoff_max, absl::Duration ping_interval)
    : options_(std::move(options)),
      listener_(listener),
      backoff_min_(backoff_min),
      backoff_max_(backoff_max),
      ping_interval_(ping_interval) {}

Subscriber::~Subscriber() {
  Stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

absl::Status Subscriber::Start() {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return absl::InternalError("redis subscriber: eventfd failed");
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void Subscriber::Wake() {
  uint64_t one = 1;
  ssize_t unused = ::write(wake_fd_, &one, sizeof(one));
  (void)unused;  // a full counter already means "wake up"
}

void Subscriber::Subscribe(const std::string& channel) {
  bool wake = false;
  {
    absl::MutexLock l(&mu_);
    Channel& ch = channels_[channel];
    if (ch.want) return;
    ch.want = true;
    if (connected_) {
      ops_.push_back(Op{true, channel});
      ++ch.pending;
      wake = true;
    }
  }
  if (wake) Wake();
}

void Subscriber::Unsubscribe(const std::string& channel) {
  bool wake = false;
  {
    absl::MutexLock l(&mu_);
    auto it = channels_.find(channel);
    if (it == channels_.end() || !it->second.want) return;
    it->second.want = false;
    it->second.active = false;
    if (connected_) {
      ops_.push_back(Op{false, channel});
      ++it->second.pending;
      wake = true;
    } else {
      channels_.erase(it);
    }
  }
  if (wake) Wake();
}

bool Subscriber::connected() const {
  absl::MutexLock l(&mu_);
  return connected_;
}

absl::Status Subscriber::last_error() const {
  absl::MutexLock l(&mu_);
  return last_error_;
}

bool Subscriber::ConnectedOrStopped() const { return connected_ || stop_; }

bool Subscriber::WaitConnected(absl::Duration timeout) const {
  absl::MutexLock l(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(this, &Subscriber::ConnectedOrStopped), timeout);
  return connected_;
}

void Subscriber::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) {
    Wake();
    thread_.join();
  }
}

bool Subscriber::Sleep(absl::Duration d) {
  absl::Time until = absl::Now() + d;
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return false;
    }
    absl::Duration left = until - absl::Now();
    if (left <= absl::ZeroDuration()) return true;
    pollfd p{wake_fd_, POLLIN, 0};
    int ms = static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
    if (::poll(&p, 1, ms) > 0) {
      uint64_t v;
      ssize_t unused = ::read(wake_fd_, &v, sizeof(v));
      (void)unused;
    }
  }
}

absl::Status Subscriber::Flush(redisContext* c) {
  std::vector<Op> ops;
  {
    absl::MutexLock l(&mu_);
    ops.swap(ops_);
  }
  for (size_t i = 0; i < ops.size();) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    const bool subscribe = ops[i].subscribe;
    argv.push_back(subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE");
    lens.push_back(subscribe ? 9 : 11);
    for (; i < ops.size() && ops[i].subscribe == subscribe && argv.size() <= kMaxChannelsPerCommand;
         ++i) {
      argv.push_back(ops[i].channel.data());
      lens.push_back(ops[i].channel.size());
    }
    redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data());
  }
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(c, &done) != REDIS_OK) return RedisError("subscriber", c, nullptr);
  }
  return absl::OkStatus();
}

absl::Status Subscriber::HandleReply(const redisReply* r) {
  if (r->type == REDIS_REPLY_STATUS) {  // PONG outside subscribe mode
    ping_outstanding_ = false;
    return absl::OkStatus();
  }
  if (r->type == REDIS_REPLY_ERROR) return RedisError("subscriber", nullptr, r);
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
      r->element[0]->type != REDIS_REPLY_STRING) {
    return RedisError("subscriber", nullptr, r);
  }
  absl::string_view kind = ReplyText(r->element[0]);
  if (kind == "pong") {
    ping_outstanding_ = false;
    return absl::OkStatus();
  }
  if (r->element[1]->type != REDIS_REPLY_STRING) return absl::OkStatus();
  std::string channel(ReplyText(r->element[1]));
  if (kind == "message") {
    bool deliver = false;
    {
      absl::MutexLock l(&mu_);
      auto it = channels_.find(channel);
      deliver = it != channels_.end() && it->second.want && it->second.active;
    }
    if (deliver) {
      absl::string_view message;
      if (r->elements >= 3 && r->element[2]->type == REDIS_REPLY_STRING) {
        message = ReplyText(r->element[2]);
      }
      listener_->OnMessage(channel, message);
    }
    return absl::OkStatus();
  }
  if (kind == "subscribe" || kind == "unsubscribe") {
    bool subscribed = false;
    {
      absl::MutexLock l(&mu_);
      auto it = channels_.find(channel);
      if (it == channels_.end()) return absl::OkStatus();
      Channel& ch = it->second;
      if (ch.pending > 0) --ch.pending;
      // Only the confirmation of the last command sent for the channel tells
      // its state on the server.
      if (ch.pending == 0) {
        if (ch.want) {
          ch.active = true;
          subscribed = true;
        } else {
          channels_.erase(it);
        }
      }
    }
    if (subscribed) listener_->OnSubscribed(channel);
  }
  return absl::OkStatus();
}

void Subscriber::Disconnected(const absl::Status& why) {
  bool stopping;
  {
    absl::MutexLock l(&mu_);
    stopping = stop_;
    bool was_connected = connected_;
    connected_ = false;
    last_error_ = why;
    ops_.clear();
    for (auto it = channels_.begin(); it != channels_.end();) {
      if (!it->second.want) {
        channels_.erase(it++);
        continue;
      }
      it->second.active = false;
      it->second.pending = 0;
      ++it;
    }
    if (was_connected && !stopping) {
      LogWarning("redis: subscriber connection lost (", why.message(), "); reconnecting");
    }
  }
  if (!stopping) listener_->OnConnectionLost(why);
}

void Subscriber::Run() {
  BlockSigpipeOnThisThread();
  absl::Duration backoff = backoff_min_;
  size_t address = 0;
  bool ever_connected = false;
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
    }
    absl::StatusOr<ContextPtr> c = Connect(options_, {}, &address);
    if (!c.ok()) {
      {
        absl::MutexLock l(&mu_);
        last_error_ = c.status();
      }
      address = (address + 1) % options_.addresses.size();
      if (!Sleep(Jitter(backoff))) return;
      backoff = std::min(backoff * 2, backoff_max_);
      continue;
    }
    ContextPtr ctx = *std::move(c);
    const absl::Time connected_at = absl::Now();
    size_t resubscribed = 0;
    {
      absl::MutexLock l(&mu_);
      connected_ = true;
      last_error_ = absl::OkStatus();
      ops_.clear();
      for (auto& [name, ch] : channels_) {
        ch.active = false;
        ch.pending = 0;
        if (ch.want) {
          ops_.push_back(Op{true, name});
          ch.pending = 1;
          ++resubscribed;
        }
      }
      if (ever_connected) {
        LogInfo("redis: subscriber reconnected to ", Where(options_.addresses[address]),
                "; re-subscribing ", resubscribed, " channel(s)");
      }
    }
    ever_connected = true;
    ping_outstanding_ = false;

    absl::Status status;
    absl::Time last_rx = absl::Now();
    absl::Time ping_sent = last_rx;
    while (true) {
      {
        absl::MutexLock l(&mu_);
        if (stop_) break;
      }
      status = Flush(ctx.get());
      if (!status.ok()) break;
      absl::Time deadline =
          ping_outstanding_ ? ping_sent + options_.command_timeout : last_rx + ping_interval_;
      int ms = static_cast<int>(
          std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()) + 1));
      pollfd fds[2] = {{ctx->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      int n = ::poll(fds, 2, ms);
      if (n < 0 && errno != EINTR) {
        status = absl::UnavailableError("redis subscriber: poll failed");
        break;
      }
      if (n > 0 && (fds[1].revents & POLLIN) != 0) {
        uint64_t v;
        ssize_t unused = ::read(wake_fd_, &v, sizeof(v));
        (void)unused;
      }
      if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        if (redisBufferRead(ctx.get()) != REDIS_OK) {
          status = RedisError("subscriber", ctx.get(), nullptr);
          break;
        }
        last_rx = absl::Now();
        while (status.ok()) {
          void* raw = nullptr;
          if (redisGetReplyFromReader(ctx.get(), &raw) != REDIS_OK) {
            status = RedisError("subscriber", ctx.get(), nullptr);
            break;
          }
          if (raw == nullptr) break;
          ReplyPtr r(static_cast<redisReply*>(raw));
          status = HandleReply(r.get());
        }
        if (!status.ok()) break;
      }
      absl::Time now = absl::Now();
      if (ping_outstanding_ && now - ping_sent > options_.command_timeout) {
        status =
            absl::UnavailableError(absl::StrCat("redis subscriber: no answer to PING within ",
                                                absl::FormatDuration(options_.command_timeout)));
        break;
      }
      if (!ping_outstanding_ && now - last_rx >= ping_interval_) {
        // Keeps a silent connection honest: a hung or vanished server shows
        // up as a missing PONG.
        redisAppendCommand(ctx.get(), "PING");
        ping_outstanding_ = true;
        ping_sent = now;
      }
    }
    ctx.reset();
    Disconnected(status.ok() ? ShuttingDownError() : status);
    // A server that accepts and then drops every connection must not make
    // this loop spin: back off unless the connection lasted a while.
    if (absl::Now() - connected_at < backoff_max_) {
      if (!Sleep(Jitter(backoff))) return;
      backoff = std::min(backoff * 2, backoff_max_);
    } else {
      backoff = backoff_min_;
    }
  }
}

}  // namespace lockd::redis
