#include "clients/cpp/src/batching_writer.h"

#include <iterator>
#include <utility>

namespace lockd::client_internal {

uint64_t BatchingWriter::Queue(v1::SessionRequest req) {
  const size_t bytes = req.ByteSizeLong();  // outside mu_
  absl::MutexLock l(&mu_);
  if (failed_) return 0;
  queued_.push_back(Queued{std::move(req), bytes});
  return ++last_queued_;
}

std::vector<BatchingWriter::Queued> BatchingWriter::TakeNext() {
  size_t n = 0;
  size_t bytes = 0;
  while (n < queued_.size() && n < kMaxBatchOps &&
         (n == 0 || bytes + queued_[n].bytes <= kMaxBatchBytes)) {
    bytes += queued_[n].bytes;
    ++n;
  }
  std::vector<Queued> next;
  if (n == queued_.size()) {
    next.swap(queued_);
  } else {
    next.assign(std::make_move_iterator(queued_.begin()),
                std::make_move_iterator(queued_.begin() + n));
    queued_.erase(queued_.begin(), queued_.begin() + n);
  }
  taken_ += n;
  return next;
}

void BatchingWriter::Flush(uint64_t ticket) {
  if (ticket == 0) return;
  absl::MutexLock w(&write_mu_);
  while (true) {
    std::vector<Queued> next;
    {
      absl::MutexLock l(&mu_);
      if (failed_ || taken_ >= ticket) return;  // written (or dropped)
      next = TakeNext();
    }
    v1::SessionRequest batch;
    const v1::SessionRequest* msg = &next.front().req;
    if (next.size() > 1) {
      auto* ops = batch.mutable_batch()->mutable_ops();
      ops->Reserve(static_cast<int>(next.size()));
      for (Queued& q : next) *ops->Add() = std::move(q.req);
      msg = &batch;
    }
    if (!write_(*msg)) {
      absl::MutexLock l(&mu_);
      failed_ = true;
      queued_.clear();
      return;
    }
  }
}

}  // namespace lockd::client_internal
