#include "backends/redis/transport.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/redis/subscriber.h"

namespace lockd::redis {
namespace {

// One CommandPool and one Subscriber on the same server.
class StandaloneTransport final : public Transport, private Subscriber::Listener {
 public:
  StandaloneTransport(TransportOptions o, Transport::Listener* listener)
      : listener_(listener),
        pool_(o.connection, o.scripts, o.pool_size, o.backoff_min, o.backoff_max),
        subscriber_(o.connection, static_cast<Subscriber::Listener*>(this), o.backoff_min,
                    o.backoff_max, o.ping_interval) {}
  ~StandaloneTransport() override { Stop(); }

  absl::Status Start() { return subscriber_.Start(); }

  absl::Status WaitReady(absl::Duration limit) override {
    absl::Time deadline = absl::Now() + limit;
    if (!pool_.WaitAllConnected(limit)) {
      return absl::UnavailableError(absl::StrCat("redis: command connections did not come up: ",
                                                 pool_.last_error().message()));
    }
    if (!subscriber_.WaitConnected(deadline - absl::Now())) {
      return absl::UnavailableError(absl::StrCat("redis: subscriber connection did not come up: ",
                                                 subscriber_.last_error().message()));
    }
    return absl::OkStatus();
  }

  void Send(Command cmd) override {
    absl::Status s = pool_.Submit(cmd);
    if (!s.ok()) std::move(cmd.done)(s);
  }

  void Send(Command cmd, Command then) override {
    absl::Status s = pool_.Submit(cmd, then);
    if (!s.ok()) {
      std::move(cmd.done)(s);
      std::move(then.done)(s);
    }
  }

  void SendAll(std::vector<Command> cmds) override {
    absl::Status s = pool_.SubmitAll(cmds);
    if (!s.ok()) {
      for (Command& c : cmds) std::move(c.done)(s);
    }
  }

  std::vector<int> ScanSlots() const override { return {-1}; }

  void Subscribe(const std::string& channel) override { subscriber_.Subscribe(channel); }
  void Unsubscribe(const std::string& channel) override { subscriber_.Unsubscribe(channel); }

  void PrimaryMoved() override {
    // The subscriber's reconnect resets the pool (OnConnectionLost); while it
    // is down already, reset the pool here.
    if (!subscriber_.ResetConnection()) pool_.ResetConnections();
  }

  absl::Status Health() const override {
    if (!subscriber_.connected()) {
      return absl::UnavailableError(absl::StrCat("redis subscriber connection is down: ",
                                                 subscriber_.last_error().message()));
    }
    if (pool_.connected() == 0) {
      return absl::UnavailableError(
          absl::StrCat("no redis command connection: ", pool_.last_error().message()));
    }
    return absl::OkStatus();
  }

  void Stop() override {
    subscriber_.Stop();
    pool_.Stop();
  }

 private:
  void OnSubscribed(const std::string& channel) override { listener_->OnSubscribed(channel); }
  void OnMessage(const std::string& channel, absl::string_view message) override {
    listener_->OnMessage(channel, message);
  }
  void OnConnectionLost(const absl::Status& why) override {
    // Idle command connections to a server that went away would fail their
    // next command; replace them now.
    pool_.ResetConnections();
  }

  Transport::Listener* const listener_;
  CommandPool pool_;
  Subscriber subscriber_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> NewStandaloneTransport(TransportOptions options,
                                                                  Transport::Listener* listener) {
  auto t = std::make_unique<StandaloneTransport>(std::move(options), listener);
  absl::Status s = t->Start();
  if (!s.ok()) return s;
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace lockd::redis
