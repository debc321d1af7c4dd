#include "backends/zookeeper/zk_codec.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/zookeeper/queue_rules.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockd::zk {
namespace {

using ::testing::ElementsAre;

TEST(EncodeSegmentTest, RoundTripsAnyName) {
  const std::vector<std::string> names = {"orders/42",
                                          "orders%2F42",
                                          "a b",
                                          "/",
                                          "//x//",
                                          ".",
                                          "..",
                                          "...",
                                          "{tag}",
                                          "zookeeper",
                                          "ünïcödé/锁",
                                          "emoji 🔒",
                                          "quote'\"`",
                                          "back\\slash",
                                          std::string(512, 'n'),
                                          std::string("\xEE\x80\x80 private use"),
                                          std::string("\xEF\xBF\xB0 specials"),
                                          "A-Z_a-z09"};
  std::set<std::string> encoded;
  for (const std::string& n : names) {
    std::string e = EncodeSegment(n);
    EXPECT_TRUE(encoded.insert(e).second) << "collision for " << n;
    EXPECT_NE(e, ".");
    EXPECT_NE(e, "..");
    for (char c : e) {
      bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '-' || c == '%';
      EXPECT_TRUE(ok) << "unexpected character in " << e;
    }
    std::string back;
    ASSERT_TRUE(DecodeSegment(e, &back)) << e;
    EXPECT_EQ(back, n);
  }
  EXPECT_EQ(EncodeSegment("a/b c"), "a%2Fb%20c");
  EXPECT_EQ(EncodeSegment("."), "%2E");
}

TEST(EncodeSegmentTest, DecodeRefusesWhatEncodeNeverWrites) {
  std::string out;
  EXPECT_FALSE(DecodeSegment("", &out));
  EXPECT_FALSE(DecodeSegment("a b", &out));
  EXPECT_FALSE(DecodeSegment("%2", &out));
  EXPECT_FALSE(DecodeSegment("%2f", &out));  // lower-case hex is not canonical
  EXPECT_FALSE(DecodeSegment("%41", &out));  // 'A' is never escaped
  EXPECT_FALSE(DecodeSegment("c-abc.", &out));
}

TEST(ContenderTest, ParsesNamesAndOrdersBySequence) {
  std::string p = NewAttemptPrefix();
  ASSERT_EQ(p.size(), 35u);
  EXPECT_NE(p, NewAttemptPrefix());
  std::vector<std::string> children = {p + "0000000012", "junk", p + "0000000003",
                                       "c-0123456789abcdef0123456789abcdef-0000000007"};
  std::vector<Contender> q = QueueOrder(children);
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[0].seq, 3);
  EXPECT_EQ(q[1].seq, 7);
  EXPECT_EQ(q[2].seq, 12);
  EXPECT_EQ(q[0].name, p + "0000000003");
  EXPECT_EQ(q[2].name, p + "0000000012");
  Contender c;
  EXPECT_FALSE(ParseContender(p + "00000000x1", &c));
  EXPECT_FALSE(ParseContender(p + "1", &c));
  int32_t seq = 0;
  EXPECT_TRUE(ContenderSeq(p + "0000000042", &seq));
  EXPECT_EQ(seq, 42);
  EXPECT_FALSE(ContenderSeq(p + "00000000x1", &seq));
  EXPECT_FALSE(ContenderSeq("junk", &seq));
}

TEST(ContenderTest, NamesOfOneOwnerShareItsTag) {
  std::string a1 = NewAttemptPrefix("alice"), a2 = NewAttemptPrefix("alice");
  std::string b = NewAttemptPrefix("bob");
  ASSERT_EQ(a1.size(), 35u);
  EXPECT_NE(a1, a2);  // still one id per attempt
  uint64_t t1 = 0, t2 = 0, tb = 0;
  ASSERT_TRUE(ContenderOwnerTag(a1 + "0000000001", &t1));
  ASSERT_TRUE(ContenderOwnerTag(a2, &t2));
  ASSERT_TRUE(ContenderOwnerTag(b, &tb));
  EXPECT_EQ(t1, OwnerTag("alice"));
  EXPECT_EQ(t1, t2);
  EXPECT_NE(t1, tb);
  // Stable across processes and versions (FNV-1a).
  EXPECT_EQ(OwnerTag(""), 0xcbf29ce484222325u);
  EXPECT_EQ(OwnerTag("a"), 0xaf63dc4c8601ec8cu);
  EXPECT_FALSE(ContenderOwnerTag("junk", &t1));
}

TEST(ContenderTest, QueueOrderSurvivesSequenceWrap) {
  // ZooKeeper formats the parent's int32 cversion with %010d; past 2^31 it
  // wraps to negative numbers, which still come later in the queue.
  std::string p = NewAttemptPrefix();
  auto name = [&](int32_t seq) { return p + absl::StrFormat("%010d", seq); };
  std::vector<std::string> children = {name(-2147483647), name(2147483646), name(2147483647),
                                       name(-2147483648)};
  std::vector<int32_t> seqs;
  for (const Contender& c : QueueOrder(children)) seqs.push_back(c.seq);
  EXPECT_THAT(seqs, ElementsAre(2147483646, 2147483647, -2147483648, -2147483647));
  EXPECT_TRUE(SeqBefore(2147483647, -2147483648));
  EXPECT_FALSE(SeqBefore(-2147483648, 2147483647));
}

ContenderKind Shared() { return ContenderKind{LockMode::kShared, 0, 0}; }
ContenderKind Sem(uint32_t permits, uint32_t limit) {
  return ContenderKind{LockMode::kExclusive, limit, permits};
}

TEST(ContenderTest, NamesCarryTheKindAndOldNamesAreExclusive) {
  // A node named before kinds existed (no tag) is an exclusive contender.
  Contender c;
  ASSERT_TRUE(ParseContender("c-0123456789abcdef0123456789abcdef-0000000007", &c));
  EXPECT_TRUE(c.kind.exclusive_lock());
  EXPECT_EQ(KindTag(ContenderKind()), "");
  for (const ContenderKind& k : {ContenderKind(), Shared(), Sem(1, 1), Sem(3, 4), Sem(7, 10000)}) {
    std::string p = NewAttemptPrefix("alice", k);
    ASSERT_TRUE(ParseContender(p + "0000000042", &c)) << p;
    EXPECT_EQ(c.kind, k) << p;
    EXPECT_EQ(c.seq, 42);
    ASSERT_TRUE(ParseContender(p + "-000000042", &c)) << p;  // a wrapped sequence
    EXPECT_EQ(c.seq, -42);
    uint64_t tag = 0;
    ASSERT_TRUE(ContenderOwnerTag(p, &tag));
    EXPECT_EQ(tag, OwnerTag("alice"));
  }
  EXPECT_EQ(KindTag(Shared()), "r-");
  EXPECT_EQ(KindTag(Sem(3, 4)), "p3of4-");
  std::string base = "c-0123456789abcdef0123456789abcdef-";
  for (const char* bad : {"x-", "p3-", "p0of4-", "p5of4-", "pof4-", "p3of-", "p03of4-", "r"}) {
    EXPECT_FALSE(ParseContender(base + bad + "0000000001", &c)) << bad;
  }
}

std::vector<Contender> Queue(const std::vector<ContenderKind>& kinds) {
  std::vector<Contender> q;
  for (size_t i = 0; i < kinds.size(); ++i) {
    q.push_back(Contender{absl::StrFormat("n%d", i), static_cast<int32_t>(i), kinds[i]});
  }
  return q;
}

TEST(QueueRulesTest, HoldersAreTheAdmittedPrefix) {
  const ContenderKind x;
  EXPECT_EQ(AdmittedCount({}), 0u);
  EXPECT_EQ(AdmittedCount(Queue({x, x, Shared()})), 1u);
  // Readers at the head together; a reader behind a waiting writer waits.
  EXPECT_EQ(AdmittedCount(Queue({Shared(), Shared(), x, Shared()})), 2u);
  EXPECT_EQ(AdmittedCount(Queue({x, Shared(), Shared()})), 1u);
  // Permits fit beside those held, in order: no barging by a small request
  // behind a large one.
  EXPECT_EQ(AdmittedCount(Queue({Sem(1, 4), Sem(2, 4), Sem(2, 4), Sem(1, 4)})), 2u);
  EXPECT_EQ(AdmittedCount(Queue({Sem(4, 4), Sem(1, 4)})), 1u);
  // Another kind behind the head is never admitted (it is refused).
  EXPECT_EQ(AdmittedCount(Queue({Sem(1, 4), Sem(1, 5), Sem(1, 4)})), 1u);
  EXPECT_EQ(AdmittedCount(Queue({Shared(), Sem(1, 4)})), 1u);
  EXPECT_EQ(AdmittedCount(Queue({Sem(1, 4), Shared()})), 1u);
}

TEST(QueueRulesTest, WaitersWatchOneNodeEachNoHerd) {
  const ContenderKind x;
  // A writer behind readers watches its predecessor; readers behind a
  // writer each watch that writer, the nearest exclusive one before them.
  std::vector<Contender> q = Queue({Shared(), Shared(), x, Shared(), Shared(), x, Shared()});
  ASSERT_EQ(AdmittedCount(q), 2u);
  EXPECT_THAT(WatchTargets(q, 2), ElementsAre(1u));
  EXPECT_THAT(WatchTargets(q, 3), ElementsAre(2u));
  EXPECT_THAT(WatchTargets(q, 4), ElementsAre(2u));
  EXPECT_THAT(WatchTargets(q, 5), ElementsAre(4u));
  EXPECT_THAT(WatchTargets(q, 6), ElementsAre(5u));
  // Exclusive waiters form a chain.
  q = Queue({x, x, x});
  EXPECT_THAT(WatchTargets(q, 1), ElementsAre(0u));
  EXPECT_THAT(WatchTargets(q, 2), ElementsAre(1u));
  // Semaphore: the first waiter watches every holder (any exit can admit
  // it); the others, whose permits do not fit beside its, their
  // predecessor. No holder has a second watcher.
  q = Queue({Sem(1, 2), Sem(1, 2), Sem(1, 2), Sem(2, 2), Sem(1, 2)});
  ASSERT_EQ(AdmittedCount(q), 2u);
  EXPECT_THAT(WatchTargets(q, 2), ElementsAre(0u, 1u));
  EXPECT_THAT(WatchTargets(q, 3), ElementsAre(2u));
  EXPECT_THAT(WatchTargets(q, 4), ElementsAre(3u));
  // Waiters whose permits fit in the limit together all watch the holders,
  // to be admitted in parallel, and their predecessor, which may give up; a
  // waiter beyond the limit its predecessor only.
  std::vector<Contender> many =
      Queue({Sem(1, 3), Sem(1, 3), Sem(1, 3), Sem(1, 3), Sem(1, 3), Sem(1, 3), Sem(1, 3)});
  ASSERT_EQ(AdmittedCount(many), 3u);
  EXPECT_THAT(WatchTargets(many, 3), ElementsAre(0u, 1u, 2u));
  EXPECT_THAT(WatchTargets(many, 5), ElementsAre(0u, 1u, 2u, 4u));
  EXPECT_THAT(WatchTargets(many, 6), ElementsAre(5u));
  std::vector<int> watchers(q.size());
  for (size_t i = AdmittedCount(q); i < q.size(); ++i) {
    for (size_t t : WatchTargets(q, i)) ++watchers[t];
  }
  EXPECT_THAT(watchers, ElementsAre(1, 1, 1, 1, 0));
}

TEST(NodeDataTest, RoundTrips) {
  NodeData d;
  d.owner = "owner with = and % and \n newline";
  d.holds = 3;
  d.ttl_ms = 30000;
  d.lease = 7;
  d.waiting = true;
  d.last = NodeData::Last::kRelease;
  d.last_id = "req-1";
  d.last_holds = 2;
  d.last_ttl_ms = 1500;
  NodeData back;
  ASSERT_TRUE(DecodeNodeData(EncodeNodeData(d), &back)) << EncodeNodeData(d);
  EXPECT_EQ(back, d);
}

TEST(NodeDataTest, RefusesForeignData) {
  NodeData d;
  EXPECT_FALSE(DecodeNodeData("", &d));
  EXPECT_FALSE(DecodeNodeData("hello", &d));
  EXPECT_FALSE(DecodeNodeData("lockd-zk-node 1\nholds=1\n", &d));  // no owner
  EXPECT_FALSE(DecodeNodeData("lockd-zk-node 1\nowner=a\nttl_ms=5\nholds=x\n", &d));
  EXPECT_TRUE(DecodeNodeData("lockd-zk-node 1\nowner=a\nttl_ms=5\nfuture=1\n", &d));
  EXPECT_FALSE(d.waiting);  // data of older versions: never marked
  EXPECT_FALSE(DecodeNodeData("lockd-zk-node 1\nowner=a\nttl_ms=5\nwaiting=x\n", &d));
}

TEST(TombstoneTest, RoundTrips) {
  Tombstone t{"alice", "rel-2"};
  Tombstone back;
  ASSERT_TRUE(DecodeTombstone(EncodeTombstone(t), &back));
  EXPECT_EQ(back.owner, "alice");
  EXPECT_EQ(back.request_id, "rel-2");
  EXPECT_FALSE(DecodeTombstone("", &back));
  EXPECT_FALSE(DecodeTombstone(EncodeNodeData(NodeData{"a", 1, 5}), &back));
}

}  // namespace
}  // namespace lockd::zk
