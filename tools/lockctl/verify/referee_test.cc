#include "tools/lockctl/verify/referee.h"

#include "gtest/gtest.h"

namespace lockd::lockctl::verify {
namespace {

TEST(RefereeTest, StaleWriteIsRejectedByTheFencedCounterOnly) {
  Referee r;
  // Holder with token 5 reads 0; its lease ends; token 6 reads 0 and writes 1.
  EXPECT_EQ(r.Read("l", 5).fenced, 0);
  EXPECT_EQ(r.Read("l", 6).unfenced, 0);
  EXPECT_TRUE(r.Write("l", 6, 1, 1));
  // The stale holder writes what it computed: the unfenced counter takes it.
  EXPECT_FALSE(r.Write("l", 5, 1, 1));
  Referee::Counters c = r.Snapshot().at("l");
  EXPECT_EQ(c.fenced, 1);
  EXPECT_EQ(c.fenced_writes, 1);
  EXPECT_EQ(c.stale_rejected, 1);
  EXPECT_EQ(c.unfenced, 1);
  EXPECT_EQ(c.unfenced_writes, 2);  // two increments, one value: an update lost
}

TEST(RefereeTest, NewerHoldersReadFencesAStaleWriteBeforeItsOwnWrite) {
  Referee r;
  r.Read("l", 5);
  r.Read("l", 6);                       // the new holder read first...
  EXPECT_FALSE(r.Write("l", 5, 1, 1));  // ...so the stale write is refused
  EXPECT_TRUE(r.Write("l", 6, 1, 1));
  EXPECT_EQ(r.Snapshot().at("l").fenced, 1);
}

TEST(RefereeTest, SameTokenWritesAgainAndNamesAreIndependent) {
  Referee r;
  r.Read("a", 9);
  EXPECT_TRUE(r.Write("a", 9, 1, 1));
  EXPECT_TRUE(r.Write("a", 9, 2, 2));
  EXPECT_TRUE(r.Write("b", 1, 1, 1));  // another lock's tokens are its own
  EXPECT_EQ(r.Snapshot().size(), 2u);
}

}  // namespace
}  // namespace lockd::lockctl::verify
