#include "backends/redis/subscriber.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/backend.h"
#include "util/log.h"

namespace lockd::redis {
namespace {

// Channels per SUBSCRIBE/UNSUBSCRIBE command.
constexpr size_t kMaxChannelsPerCommand = 256;

}  // namespace

Subscriber::Subscriber(ConnectionOptions options, Listener* listener, absl::Duration backoff_min,
                       absl::Duration backoff_max, absl::Duration ping_interval, bool sharded)
    : options_(std::move(options)),
      listener_(listener),
      backoff_min_(backoff_min),
      backoff_max_(backoff_max),
      ping_interval_(ping_interval),
      sharded_(sharded) {}

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

bool Subscriber::ResetConnection() {
  {
    absl::MutexLock l(&mu_);
    if (!connected_ || stop_) return false;
    reset_ = true;
  }
  Wake();
  return true;
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
  // Sharded channels of different slots cannot share a command.
  const size_t per_command = sharded_ ? 1 : kMaxChannelsPerCommand;
  for (size_t i = 0; i < ops.size();) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    const bool subscribe = ops[i].subscribe;
    static constexpr absl::string_view kVerbs[2][2] = {{"UNSUBSCRIBE", "SUBSCRIBE"},
                                                       {"SUNSUBSCRIBE", "SSUBSCRIBE"}};
    absl::string_view verb = kVerbs[sharded_ ? 1 : 0][subscribe ? 1 : 0];
    argv.push_back(verb.data());
    lens.push_back(verb.size());
    for (; i < ops.size() && ops[i].subscribe == subscribe && argv.size() <= per_command; ++i) {
      argv.push_back(ops[i].channel.data());
      lens.push_back(ops[i].channel.size());
      if (sharded_) sent_.push_back(ops[i]);
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
  if (r->type == REDIS_REPLY_ERROR && sharded_ && !sent_.empty()) {
    // Errors answer (UN)SUBSCRIBEs in order; the only one expected is -MOVED.
    Op op = std::move(sent_.front());
    sent_.pop_front();
    Lost(op.channel, /*unsolicited=*/false, ReplyText(r));
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
  if (kind == "message" || kind == "smessage") {
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
    Confirmed(channel);
  } else if (kind == "ssubscribe" || kind == "sunsubscribe") {
    const bool subscribe = kind == "ssubscribe";
    if (!sent_.empty() && sent_.front().subscribe == subscribe &&
        sent_.front().channel == channel) {
      sent_.pop_front();
      Confirmed(channel);
    } else if (!subscribe) {
      // Pushed without being asked: the channel's slot left this node.
      Lost(channel, /*unsolicited=*/true, "the channel's slot moved to another node");
    }
  }
  return absl::OkStatus();
}

void Subscriber::Confirmed(const std::string& channel) {
  bool subscribed = false;
  {
    absl::MutexLock l(&mu_);
    auto it = channels_.find(channel);
    if (it == channels_.end()) return;
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

void Subscriber::Lost(const std::string& channel, bool unsolicited, absl::string_view why) {
  bool lost = false;
  {
    absl::MutexLock l(&mu_);
    auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    Channel& ch = it->second;
    if (!unsolicited && ch.pending > 0) --ch.pending;
    if (ch.pending > 0) return;  // a later command decides
    lost = ch.want && (ch.active || !unsolicited);
    ch.active = false;
    if (!ch.want) channels_.erase(it);
  }
  if (lost) listener_->OnChannelLost(channel, why);
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
    sent_.clear();
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
    Connected(address, ever_connected);
    ever_connected = true;
    absl::Status status = Serve(ctx.get());
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

void Subscriber::Connected(size_t address, bool reconnected) {
  size_t resubscribed = 0;
  {
    absl::MutexLock l(&mu_);
    connected_ = true;
    reset_ = false;
    last_error_ = absl::OkStatus();
    ops_.clear();
    sent_.clear();
    for (auto& [name, ch] : channels_) {
      ch.active = false;
      ch.pending = 0;
      if (ch.want) {
        ops_.push_back(Op{true, name});
        ch.pending = 1;
        ++resubscribed;
      }
    }
    if (reconnected) {
      LogInfo("redis: subscriber reconnected to ", Where(options_.addresses[address]),
              "; re-subscribing ", resubscribed, " channel(s)");
    }
  }
  ping_outstanding_ = false;
}

absl::Status Subscriber::Serve(redisContext* ctx) {
  absl::Time last_rx = absl::Now();
  absl::Time ping_sent = last_rx;
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return absl::OkStatus();
      if (reset_) return absl::UnavailableError("redis subscriber: reconnecting (primary moved)");
    }
    absl::Status status = Flush(ctx);
    if (!status.ok()) return status;
    absl::Time deadline =
        ping_outstanding_ ? ping_sent + options_.command_timeout : last_rx + ping_interval_;
    int ms = static_cast<int>(
        std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()) + 1));
    pollfd fds[2] = {{ctx->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int n = ::poll(fds, 2, ms);
    if (n < 0 && errno != EINTR) return absl::UnavailableError("redis subscriber: poll failed");
    if (n > 0 && (fds[1].revents & POLLIN) != 0) {
      uint64_t v;
      ssize_t unused = ::read(wake_fd_, &v, sizeof(v));
      (void)unused;
    }
    if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      status = ReadReplies(ctx);
      if (!status.ok()) return status;
      last_rx = absl::Now();
    }
    absl::Time now = absl::Now();
    if (ping_outstanding_ && now - ping_sent > options_.command_timeout) {
      return absl::UnavailableError(absl::StrCat("redis subscriber: no answer to PING within ",
                                                 absl::FormatDuration(options_.command_timeout)));
    }
    if (!ping_outstanding_ && now - last_rx >= ping_interval_) {
      // Keeps a silent connection honest: a hung or vanished server shows
      // up as a missing PONG.
      redisAppendCommand(ctx, "PING");
      ping_outstanding_ = true;
      ping_sent = now;
    }
  }
}

absl::Status Subscriber::ReadReplies(redisContext* ctx) {
  if (redisBufferRead(ctx) != REDIS_OK) return RedisError("subscriber", ctx, nullptr);
  while (true) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(ctx, &raw) != REDIS_OK) {
      return RedisError("subscriber", ctx, nullptr);
    }
    if (raw == nullptr) return absl::OkStatus();
    ReplyPtr r(static_cast<redisReply*>(raw));
    absl::Status status = HandleReply(r.get());
    if (!status.ok()) return status;
  }
}

}  // namespace lockd::redis
