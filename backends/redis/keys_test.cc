#include "backends/redis/keys.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backends/redis/cluster_slots.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd::redis {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::HasSubstr;

// Names the API allows that are awkward for Redis keys and glob patterns.
const std::vector<std::string>& AwkwardNames() {
  static const auto* names =
      new std::vector<std::string>{"orders/42", "orders%2F42", "%",
                                   "%25",       "%%",          "a b",
                                   "/",         "//x//",       "..",
                                   "{tag}",     "}{",          "{",
                                   "}",         "x:y",         ":",
                                   "a*b?[c]",   "\\",          "ünïcödé/锁",
                                   "emoji 🔒",   "quote'\"`",   std::string(512, 'n'),
                                   "\x7f",      "tab\there"};
  return *names;
}

TEST(EncodeNameTest, RoundTripsEveryAwkwardName) {
  for (const std::string& name : AwkwardNames()) {
    std::optional<std::string> back = DecodeName(EncodeName(name));
    ASSERT_TRUE(back.has_value()) << name;
    EXPECT_EQ(*back, name);
  }
}

TEST(EncodeNameTest, IsInjective) {
  std::set<std::string> encoded;
  for (const std::string& name : AwkwardNames()) encoded.insert(EncodeName(name));
  EXPECT_EQ(encoded.size(), AwkwardNames().size());
}

TEST(EncodeNameTest, NeverProducesBracesOrGlobCharacters) {
  for (const std::string& name : AwkwardNames()) {
    std::string e = EncodeName(name);
    for (char c : std::string("{}*?[]\\")) {
      EXPECT_EQ(e.find(c), std::string::npos) << name << " -> " << e;
    }
  }
}

TEST(EncodeNameTest, KeepsPlainAndNonAsciiBytes) {
  EXPECT_EQ(EncodeName("orders/42 x:y"), "orders/42 x:y");
  EXPECT_EQ(EncodeName("锁"), "锁");
  EXPECT_EQ(EncodeName("{a}%"), "%7Ba%7D%25");
}

TEST(EncodeNameTest, PreservesPrefixes) {
  for (const std::string& a : AwkwardNames()) {
    for (const std::string& b : AwkwardNames()) {
      EXPECT_EQ(absl::StartsWith(a, b), absl::StartsWith(EncodeName(a), EncodeName(b)))
          << "a=" << a << " b=" << b;
    }
  }
}

TEST(DecodeNameTest, RejectsWhatEncodeNeverProduces) {
  EXPECT_FALSE(DecodeName("%").has_value());
  EXPECT_FALSE(DecodeName("%2").has_value());
  EXPECT_FALSE(DecodeName("%7b").has_value()) << "lower-case hex";
  EXPECT_FALSE(DecodeName("%41").has_value()) << "an escaped plain byte";
  EXPECT_FALSE(DecodeName("a{b").has_value());
  EXPECT_FALSE(DecodeName("a*").has_value());
}

TEST(ValidateKeyPrefixTest, AcceptsSafePrefixes) {
  EXPECT_TRUE(ValidateKeyPrefix("lockd").ok());
  EXPECT_TRUE(ValidateKeyPrefix("prod:lockd/v1_a-b.c").ok());
}

TEST(ValidateKeyPrefixTest, RejectsBracesGlobsAndEmpty) {
  for (std::string bad : {"", "a{b", "a}b", "a*", "a?", "a[b]", "a\\b", "a b"}) {
    absl::Status s = ValidateKeyPrefix(bad);
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
    EXPECT_THAT(s.message(), HasSubstr("redis.key_prefix")) << bad;
  }
  EXPECT_FALSE(ValidateKeyPrefix(std::string(65, 'p')).ok());
}

// The part of a key Redis Cluster hashes: between the first '{' and the
// next '}'.
std::string HashTag(const std::string& key) {
  size_t open = key.find('{');
  size_t close = key.find('}', open + 1);
  return key.substr(open + 1, close - open - 1);
}

TEST(KeyCodecTest, AllKeysOfALockShareOneHashTag) {
  KeyCodec codec("lockd");
  for (const std::string& name : AwkwardNames()) {
    LockKeys k = codec.KeysFor(LockKey{"ns", name});
    std::string tag = HashTag(k.lock);
    EXPECT_EQ(tag, absl::StrCat("ns:", EncodeName(name)));
    EXPECT_EQ(HashTag(k.fence), tag);
    EXPECT_EQ(HashTag(k.freed), tag);
    EXPECT_EQ(HashTag(k.queue), tag);
    EXPECT_EQ(HashTag(k.qlife), tag);
    EXPECT_EQ(HashTag(k.channel), tag);
  }
}

// The queue keys of shared locks and semaphores are written by the same
// scripts as the lock: in cluster mode they must hash to its slot.
TEST(KeyCodecTest, QueueKeysHashToTheSlotOfTheLock) {
  KeyCodec codec("lockd");
  for (const std::string& name : AwkwardNames()) {
    LockKeys k = codec.KeysFor(LockKey{"ns", name});
    int slot = HashSlot(k.lock);
    EXPECT_EQ(HashSlot(k.queue), slot) << k.queue;
    EXPECT_EQ(HashSlot(k.qlife), slot) << k.qlife;
    EXPECT_EQ(HashSlot(k.fence), slot) << k.fence;
    EXPECT_EQ(HashSlot(k.channel), slot) << k.channel;
  }
}

TEST(KeyCodecTest, LayoutIsDocumented) {
  KeyCodec codec("p");
  LockKeys k = codec.KeysFor(LockKey{"default", "a{b}"});
  EXPECT_EQ(k.lock, "p:{default:a%7Bb%7D}:lock");
  EXPECT_EQ(k.fence, "p:{default:a%7Bb%7D}:fence");
  EXPECT_EQ(k.freed, "p:{default:a%7Bb%7D}:freed");
  EXPECT_EQ(k.queue, "p:{default:a%7Bb%7D}:queue");
  EXPECT_EQ(k.qlife, "p:{default:a%7Bb%7D}:qlife");
  EXPECT_EQ(k.channel, "p:{default:a%7Bb%7D}:rel");
  EXPECT_EQ(codec.ChannelFor(LockKey{"default", "a{b}"}), k.channel);
}

TEST(KeyCodecTest, ParsesItsOwnKeysAndChannelsOnly) {
  KeyCodec codec("lockd");
  for (const std::string& name : AwkwardNames()) {
    LockKey key{"my-ns.1", name};
    LockKeys k = codec.KeysFor(key);
    EXPECT_EQ(codec.ParseLockKey(k.lock), key);
    EXPECT_EQ(codec.ParseChannel(k.channel), key);
    EXPECT_FALSE(codec.ParseLockKey(k.fence).has_value());
    EXPECT_FALSE(codec.ParseChannel(k.lock).has_value());
  }
  KeyCodec other("lockd:x");
  EXPECT_FALSE(other.ParseLockKey(codec.KeysFor(LockKey{"ns", "a"}).lock).has_value());
  EXPECT_FALSE(codec.ParseLockKey(other.KeysFor(LockKey{"ns", "a"}).lock).has_value());
  EXPECT_FALSE(codec.ParseLockKey("lockd:{nocolon}:lock").has_value());
  EXPECT_FALSE(codec.ParseLockKey("lockd:{bad ns:a}:lock").has_value());
  EXPECT_FALSE(codec.ParseLockKey("lockd:{ns:}:lock").has_value());
}

// Redis' glob matcher, reduced to what KeyCodec patterns use ('*' only).
bool GlobMatch(absl::string_view pattern, absl::string_view s) {
  if (pattern.empty()) return s.empty();
  if (pattern[0] == '*') {
    for (size_t i = 0; i <= s.size(); ++i) {
      if (GlobMatch(pattern.substr(1), s.substr(i))) return true;
    }
    return false;
  }
  return !s.empty() && pattern[0] == s[0] && GlobMatch(pattern.substr(1), s.substr(1));
}

TEST(KeyCodecTest, LockKeyPatternMatchesExactlyTheNamesWithThePrefix) {
  KeyCodec codec("lockd");
  for (const std::string& prefix : AwkwardNames()) {
    std::string pattern = codec.LockKeyPattern("ns", prefix);
    for (const std::string& name : AwkwardNames()) {
      LockKeys k = codec.KeysFor(LockKey{"ns", name});
      EXPECT_EQ(GlobMatch(pattern, k.lock), absl::StartsWith(name, prefix))
          << "prefix=" << prefix << " name=" << name;
      EXPECT_FALSE(GlobMatch(pattern, k.fence));
      EXPECT_FALSE(GlobMatch(pattern, codec.KeysFor(LockKey{"ns2", name}).lock));
    }
  }
  EXPECT_TRUE(GlobMatch(codec.LockKeyPattern("ns", ""), codec.KeysFor(LockKey{"ns", "x"}).lock));
}

TEST(KeyCodecTest, AllPatternsCoverEveryKeyOfThePrefix) {
  KeyCodec codec("lockd");
  LockKeys k = codec.KeysFor(LockKey{"ns", "a}b"});
  for (const std::string* key : {&k.lock, &k.fence, &k.freed}) {
    EXPECT_TRUE(GlobMatch(codec.AllKeysPattern(), *key)) << *key;
  }
  EXPECT_TRUE(GlobMatch(codec.AllChannelsPattern(), k.channel));
  EXPECT_FALSE(GlobMatch(codec.AllKeysPattern(), KeyCodec("lockd2").KeysFor({"ns", "a"}).lock));
}

}  // namespace
}  // namespace lockd::redis
