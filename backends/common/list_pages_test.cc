#include "backends/common/list_pages.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockd {
namespace {

using ::testing::ElementsAre;

// Names "a".."j"; every other one ("b", "d", ...) is held. Describe calls are
// answered round by round, so each round is one batch.
class ListByDescribingTest : public ::testing::Test {
 protected:
  // Lists one page; returns the sizes of the batches it described.
  std::vector<size_t> List(uint32_t page_size, DescribeBatch batch) {
    std::vector<std::string> names;
    for (char c = 'a'; c <= 'j'; ++c) names.emplace_back(1, c);
    std::vector<std::pair<LockKey, Callback<LockState>>> pending;
    ListByDescribing(
        "ns", std::move(names), page_size,
        [&pending](const LockKey& key, Callback<LockState> done) {
          pending.emplace_back(key, std::move(done));
        },
        [this](absl::StatusOr<ListResult> r) { result_ = std::move(r); }, batch);
    std::vector<size_t> batches;
    while (!pending.empty()) {
      batches.push_back(pending.size());
      auto round = std::move(pending);
      pending.clear();
      for (auto& [key, done] : round) {
        LockState s;
        s.key = key;
        s.held = (key.name[0] - 'a') % 2 == 1;
        std::move(done)(s);
      }
    }
    return batches;
  }

  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    for (const LockState& s : result_->value().locks) out.push_back(s.key.name);
    return out;
  }

  std::optional<absl::StatusOr<ListResult>> result_;
};

TEST_F(ListByDescribingTest, DescribesAsManyAsThePageStillNeedsByDefault) {
  EXPECT_THAT(List(2, {}), ElementsAre(3, 2, 1));
  ASSERT_TRUE(result_.has_value() && result_->ok());
  EXPECT_THAT(Names(), ElementsAre("b", "d"));
  EXPECT_EQ(result_->value().next_page_token, "d");
}

TEST_F(ListByDescribingTest, BatchBoundsChangeTheRoundsButNotThePage) {
  EXPECT_THAT(List(2, DescribeBatch{8, 64}), ElementsAre(8));
  EXPECT_THAT(Names(), ElementsAre("b", "d"));
  EXPECT_EQ(result_->value().next_page_token, "d");

  EXPECT_THAT(List(4, DescribeBatch{1, 2}), ElementsAre(2, 2, 2, 2, 1, 1));
  EXPECT_THAT(Names(), ElementsAre("b", "d", "f", "h"));
  EXPECT_EQ(result_->value().next_page_token, "h");
}

TEST_F(ListByDescribingTest, TheLastPageHasNoToken) {
  EXPECT_THAT(List(5, DescribeBatch{8, 64}), ElementsAre(8, 2));
  EXPECT_THAT(Names(), ElementsAre("b", "d", "f", "h", "j"));
  EXPECT_EQ(result_->value().next_page_token, "");
}

}  // namespace
}  // namespace lockd
