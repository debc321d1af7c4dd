// The subscriber's sharded mode (cluster) against a scripted fake server
// speaking the Redis protocol on a loopback port: how it takes a refused
// SSUBSCRIBE (-MOVED) and a `sunsubscribe` push (the slot left the node).

#include "backends/redis/subscriber.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace lockd::redis {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);

std::string Bulk(absl::string_view s) { return absl::StrCat("$", s.size(), "\r\n", s, "\r\n"); }
std::string Push(absl::string_view kind, absl::string_view channel, absl::string_view third) {
  return absl::StrCat("*3\r\n", Bulk(kind), Bulk(channel), third);
}

// Accepts one connection; answers PING, and SSUBSCRIBE/SUNSUBSCRIBE with a
// confirmation, or with -MOVED for the channels in `refused`. Send() writes
// raw protocol (pushes) to the client.
class FakeNode {
 public:
  explicit FakeNode(std::vector<std::string> refused) : refused_(std::move(refused)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(::listen(listen_fd_, 4), 0);
    EXPECT_EQ(::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeNode() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    ::close(listen_fd_);
  }
  int port() const { return port_; }

  void Send(const std::string& data) {
    absl::MutexLock l(&mu_);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(data.size()));
  }

 private:
  void Serve() {
    int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    {
      absl::MutexLock l(&mu_);
      fd_ = fd;
    }
    redisReader* reader = redisReaderCreate();
    bool subscribed = false;
    char buf[4096];
    while (!stop_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      redisReaderFeed(reader, buf, static_cast<size_t>(n));
      void* raw = nullptr;
      while (redisReaderGetReply(reader, &raw) == REDIS_OK && raw != nullptr) {
        ReplyPtr cmd(static_cast<redisReply*>(raw));
        std::string verb(ReplyText(cmd->element[0]));
        std::string out;
        if (verb == "PING") {
          out = subscribed ? absl::StrCat("*2\r\n", Bulk("pong"), Bulk("")) : "+PONG\r\n";
        } else if (verb == "SSUBSCRIBE" || verb == "SUNSUBSCRIBE") {
          subscribed = true;
          std::string channel(ReplyText(cmd->element[1]));
          bool refused = std::find(refused_.begin(), refused_.end(), channel) != refused_.end();
          out = refused
                    ? "-MOVED 1 127.0.0.1:1\r\n"
                    : Push(verb == "SSUBSCRIBE" ? "ssubscribe" : "sunsubscribe", channel, ":1\r\n");
        } else {
          out = "-ERR unexpected\r\n";
        }
        absl::MutexLock l(&mu_);
        ::send(fd_, out.data(), out.size(), MSG_NOSIGNAL);
      }
    }
    redisReaderFree(reader);
    absl::MutexLock l(&mu_);
    ::close(fd_);
    fd_ = -1;
  }

  const std::vector<std::string> refused_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;
  std::thread thread_;
};

// Records the listener calls as lines ("subscribed a", "message a hi", ...).
class Recorder final : public Subscriber::Listener {
 public:
  void OnSubscribed(const std::string& channel) override {
    Add(absl::StrCat("subscribed ", channel));
  }
  void OnMessage(const std::string& channel, absl::string_view message) override {
    Add(absl::StrCat("message ", channel, " ", message));
  }
  void OnConnectionLost(const absl::Status& why) override { Add("connection lost"); }
  void OnChannelLost(const std::string& channel, absl::string_view why) override {
    Add(absl::StrCat("lost ", channel));
  }

  // Waits until `line` was recorded `times` times (true) or kWait passes.
  bool WaitFor(const std::string& line, int times = 1) {
    absl::MutexLock l(&mu_);
    absl::Time deadline = absl::Now() + kWait;
    while (Count(line) < times && !cv_.WaitWithDeadline(&mu_, deadline)) {
    }
    return Count(line) >= times;
  }
  std::vector<std::string> lines() {
    absl::MutexLock l(&mu_);
    return lines_;
  }

 private:
  int Count(const std::string& line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(std::count(lines_.begin(), lines_.end(), line));
  }
  void Add(std::string line) {
    absl::MutexLock l(&mu_);
    lines_.push_back(std::move(line));
    cv_.SignalAll();
  }
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<Subscriber> Connect(const FakeNode& node, Recorder* recorder) {
  ConnectionOptions o;
  o.addresses = {Endpoint{"127.0.0.1", node.port()}};
  auto s = std::make_unique<Subscriber>(o, recorder, absl::Milliseconds(10),
                                        absl::Milliseconds(100), absl::Seconds(1),
                                        /*sharded=*/true);
  EXPECT_TRUE(s->Start().ok());
  EXPECT_TRUE(s->WaitConnected(kWait));
  return s;
}

TEST(ShardedSubscriberTest, ARefusedSubscriptionIsLostAndTheConnectionStays) {
  FakeNode node({"elsewhere"});
  Recorder recorder;
  std::unique_ptr<Subscriber> s = Connect(node, &recorder);
  s->Subscribe("elsewhere");
  s->Subscribe("here");
  EXPECT_TRUE(recorder.WaitFor("lost elsewhere"));
  EXPECT_TRUE(recorder.WaitFor("subscribed here"));
  EXPECT_TRUE(s->connected());
  node.Send(Push("smessage", "here", Bulk("7")));
  EXPECT_TRUE(recorder.WaitFor("message here 7"));
  s->Stop();
  std::vector<std::string> lines = recorder.lines();
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "subscribed elsewhere"), 0);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "connection lost"), 0);
}

TEST(ShardedSubscriberTest, ASunsubscribePushIsLostUntilSubscribedAgain) {
  FakeNode node({});
  Recorder recorder;
  std::unique_ptr<Subscriber> s = Connect(node, &recorder);
  s->Subscribe("ch");
  ASSERT_TRUE(recorder.WaitFor("subscribed ch"));
  // The slot left the node: Redis 7 tells the client with a push.
  node.Send(Push("sunsubscribe", "ch", ":0\r\n"));
  EXPECT_TRUE(recorder.WaitFor("lost ch"));
  node.Send(Push("smessage", "ch", Bulk("dropped")));
  // Moved back (or to this node again): subscribing anew brings it back.
  s->Unsubscribe("ch");
  s->Subscribe("ch");
  ASSERT_TRUE(recorder.WaitFor("subscribed ch", 2));
  node.Send(Push("smessage", "ch", Bulk("late")));
  EXPECT_TRUE(recorder.WaitFor("message ch late"));
  s->Stop();
  std::vector<std::string> lines = recorder.lines();
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "message ch dropped"), 0);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "connection lost"), 0);
}

}  // namespace
}  // namespace lockd::redis
