#include "backends/zookeeper/contender_listing.h"

#include <algorithm>
#include <utility>

namespace lockd::zk {

size_t FindContender(const std::vector<Contender>& queue, absl::string_view name) {
  int32_t own_seq;
  if (!ContenderSeq(name, &own_seq)) return queue.size();
  auto it = std::lower_bound(queue.begin(), queue.end(), own_seq,
                             [](const Contender& c, int32_t seq) { return SeqBefore(c.seq, seq); });
  if (it == queue.end() || it->name != name) return queue.size();
  return static_cast<size_t>(it - queue.begin());
}

void ContenderListing::List(const std::string& lock_path, ListingCb cb, Freshness f) {
  bool latest = f == Freshness::kLatest;
  {
    absl::MutexLock l(&mu_);
    auto [it, first] = waiting_.try_emplace(lock_path);
    if (!first) {
      it->second.cbs.push_back(std::move(cb));
      it->second.latest = it->second.latest || latest;
      return;
    }
  }
  std::vector<ListingCb> batch;
  batch.push_back(std::move(cb));
  Send(lock_path, std::move(batch), latest);
}

void ContenderListing::Send(const std::string& lock_path, std::vector<ListingCb> batch,
                            bool latest) {
  std::vector<Op> ops;
  // A failed sync fails the listing behind it too (same session, in order).
  if (latest) ops.push_back(Op::Sync(lock_path, [](Result) {}));
  ops.push_back(
      Op::Children(lock_path, [this, lock_path, batch = std::move(batch)](Result r) mutable {
        auto listing = std::make_shared<Listing>();
        listing->rc = r.rc;
        if (r.rc == ZOK) {
          listing->stat = r.stat;
          listing->queue = QueueOrder(std::move(r.children));
          listing->first_of_tag.reserve(listing->queue.size());
          for (size_t i = 0; i < listing->queue.size(); ++i) {
            uint64_t tag;
            if (ContenderOwnerTag(listing->queue[i].name, &tag)) {
              listing->first_of_tag.try_emplace(tag, i);
            }
          }
        }
        r = Result();
        std::vector<ListingCb> next;
        bool next_latest = false;
        {
          absl::MutexLock l(&mu_);
          auto it = waiting_.find(lock_path);
          if (it != waiting_.end()) {
            if (it->second.cbs.empty()) {
              waiting_.erase(it);
            } else {
              next.swap(it->second.cbs);
              next_latest = std::exchange(it->second.latest, false);
            }
          }
        }
        // The next one first: it is in flight while this batch is served.
        if (!next.empty()) Send(lock_path, std::move(next), next_latest);
        ListingPtr shared = std::move(listing);
        for (ListingCb& cb : batch) std::move(cb)(shared);
      }));
  zk_->Submit(std::move(ops));
}

}  // namespace lockd::zk
