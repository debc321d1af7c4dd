#include "service/session_writer.h"

#include <utility>

namespace lockd {
namespace {

bool Batchable(const v1::SessionResponse& r) {
  return r.kind_case() == v1::SessionResponse::kResult ||
         r.kind_case() == v1::SessionResponse::kLost;
}

}  // namespace

void SessionWriter::Send(v1::SessionResponse resp) {
  const v1::SessionResponse* write = nullptr;
  {
    absl::MutexLock l(&mu_);
    if (state_ == State::kFailed || state_ == State::kClosed) return;
    outbox_.push_back(std::move(resp));
    if (state_ == State::kWriting) return;
    state_ = State::kWriting;
    TakeNextWrite();
    write = &writing_now_;
  }
  start_write_(write);
}

void SessionWriter::EnableBatches() {
  absl::MutexLock l(&mu_);
  batches_ = true;
}

bool SessionWriter::WriteDone(bool ok) {
  const v1::SessionResponse* write = nullptr;
  {
    absl::MutexLock l(&mu_);
    if (!ok) {
      state_ = State::kFailed;  // the stream is broken; OnCancel follows
      outbox_.clear();
      return true;
    }
    if (outbox_.empty()) {
      state_ = State::kIdle;
      return true;
    }
    TakeNextWrite();
    write = &writing_now_;
  }
  start_write_(write);
  return false;
}

bool SessionWriter::CloseIfIdle() {
  absl::MutexLock l(&mu_);
  if (state_ == State::kWriting) return false;
  state_ = State::kClosed;
  return true;
}

// Protobuf moves between messages without an arena swap their contents, so
// no response is copied on its way into a batch.
void SessionWriter::TakeNextWrite() {
  writing_now_ = std::move(outbox_.front());
  outbox_.pop_front();
  if (!batches_ || outbox_.empty() || !Batchable(writing_now_)) return;
  // The responses after the head that join it.
  size_t bytes = writing_now_.ByteSizeLong();
  int items = 1;
  auto end = outbox_.begin();
  for (; end != outbox_.end() && items < kMaxResponseBatch && Batchable(*end); ++end, ++items) {
    const size_t next = end->ByteSizeLong();
    if (bytes + next > kMaxResponseBatchBytes) break;
    bytes += next;
  }
  if (items == 1) return;  // alone after all
  v1::SessionResponse head = std::move(writing_now_);
  writing_now_.Clear();
  v1::SessionResponseBatch* batch = writing_now_.mutable_batch();
  batch->mutable_items()->Reserve(items);
  *batch->add_items() = std::move(head);
  for (auto it = outbox_.begin(); it != end; ++it) *batch->add_items() = std::move(*it);
  outbox_.erase(outbox_.begin(), end);
}

}  // namespace lockd
