#include "backends/common/coalescing_scope.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockd {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Records its name in `log` when sent, and what was held back in it.
class Recorder final : public CoalescingScope::Pending {
 public:
  Recorder(std::string name, std::vector<std::string>* log) : name_(std::move(name)), log_(log) {}
  void Send() override {
    std::string line = name_ + ":";
    for (const std::string& op : ops_) line += " " + op;
    log_->push_back(line);
  }
  void Hold(std::string op) { ops_.push_back(std::move(op)); }

 private:
  std::string name_;
  std::vector<std::string>* log_;
  std::vector<std::string> ops_;
};

// What a backend does on each call: hold the op back in its Pending for
// `key` while a scope is open, else send it at once.
void Call(const void* key, const std::string& name, const std::string& op,
          std::vector<std::string>* log) {
  CoalescingScope* scope = CoalescingScope::Current();
  if (scope == nullptr) {
    log->push_back(name + ": " + op);
    return;
  }
  auto* pending = static_cast<Recorder*>(scope->Find(key));
  if (pending == nullptr) {
    pending = static_cast<Recorder*>(scope->Add(key, std::make_unique<Recorder>(name, log)));
  }
  pending->Hold(op);
}

TEST(CoalescingScopeTest, WorkHeldBackInAScopeIsSentOncePerDestinationWhenItCloses) {
  std::vector<std::string> log;
  int redis = 0, mysql = 0;  // two destinations, told apart by their address
  EXPECT_EQ(CoalescingScope::Current(), nullptr);
  {
    CoalescingScope scope;
    EXPECT_EQ(CoalescingScope::Current(), &scope);
    Call(&redis, "redis", "acquire a", &log);
    Call(&mysql, "mysql", "acquire b", &log);
    Call(&redis, "redis", "release c", &log);
    EXPECT_THAT(log, IsEmpty());
  }
  EXPECT_THAT(log, ElementsAre("redis: acquire a release c", "mysql: acquire b"));
  EXPECT_EQ(CoalescingScope::Current(), nullptr);
  Call(&redis, "redis", "acquire d", &log);  // no scope: at once
  EXPECT_EQ(log.back(), "redis: acquire d");
}

TEST(CoalescingScopeTest, AnInnerScopePassesThroughAndTheOuterOneSends) {
  std::vector<std::string> log;
  int redis = 0;
  {
    CoalescingScope outer;
    {
      CoalescingScope inner;
      EXPECT_EQ(CoalescingScope::Current(), &outer);
      Call(&redis, "redis", "a", &log);
    }
    EXPECT_THAT(log, IsEmpty());
    Call(&redis, "redis", "b", &log);
  }
  EXPECT_THAT(log, ElementsAre("redis: a b"));
}

TEST(CoalescingScopeTest, AScopeBelongsToTheThreadThatOpenedIt) {
  CoalescingScope scope;
  CoalescingScope* seen = &scope;
  std::thread other([&] { seen = CoalescingScope::Current(); });
  other.join();
  EXPECT_EQ(seen, nullptr);
}

// What a Pending starts while being sent (e.g. a retry) is not held back
// again: the scope is closed by then.
TEST(CoalescingScopeTest, WhatSendStartsIsNotHeldBack) {
  class Resender final : public CoalescingScope::Pending {
   public:
    explicit Resender(CoalescingScope** seen) : seen_(seen) {}
    void Send() override { *seen_ = CoalescingScope::Current(); }

   private:
    CoalescingScope** seen_;
  };
  CoalescingScope* seen = nullptr;
  int key = 0;
  {
    CoalescingScope scope;
    scope.Add(&key, std::make_unique<Resender>(&seen));
    seen = &scope;
  }
  EXPECT_EQ(seen, nullptr);
}

}  // namespace
}  // namespace lockd
