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

void ContenderListing::List(const std::string& lock_path, ListingCb cb) {
  {
    absl::MutexLock l(&mu_);
    auto [it, first] = waiting_.try_emplace(lock_path);
    if (!first) {
      it->second.push_back(std::move(cb));
      return;
    }
  }
  std::vector<ListingCb> batch;
  batch.push_back(std::move(cb));
  Send(lock_path, std::move(batch));
}

void ContenderListing::Send(const std::string& lock_path, std::vector<ListingCb> batch) {
  zk_->Submit(
      Op::Children(lock_path, [this, lock_path, batch = std::move(batch)](Result r) mutable {
        auto listing = std::make_shared<Listing>();
        listing->rc = r.rc;
        if (r.rc == ZOK) {
          listing->stat = r.stat;
          listing->queue = QueueOrder(std::move(r.children));
        }
        r = Result();
        std::vector<ListingCb> next;
        {
          absl::MutexLock l(&mu_);
          auto it = waiting_.find(lock_path);
          if (it != waiting_.end()) {
            if (it->second.empty()) {
              waiting_.erase(it);
            } else {
              next.swap(it->second);
            }
          }
        }
        // The next one first: it is in flight while this batch is served.
        if (!next.empty()) Send(lock_path, std::move(next));
        ListingPtr shared = std::move(listing);
        for (ListingCb& cb : batch) std::move(cb)(shared);
      }));
}

}  // namespace lockd::zk
