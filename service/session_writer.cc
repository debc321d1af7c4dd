#include "service/session_writer.h"

#include <utility>

namespace lockd {

void SessionWriter::Send(v1::SessionResponse resp) {
  const v1::SessionResponse* write = nullptr;
  {
    absl::MutexLock l(&mu_);
    if (state_ == State::kFailed || state_ == State::kClosed) return;
    outbox_.push_back(std::move(resp));
    if (state_ == State::kWriting) return;
    state_ = State::kWriting;
    writing_now_ = std::move(outbox_.front());
    outbox_.pop_front();
    write = &writing_now_;
  }
  stream_->StartWrite(write);
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
    writing_now_ = std::move(outbox_.front());
    outbox_.pop_front();
    write = &writing_now_;
  }
  stream_->StartWrite(write);
  return false;
}

bool SessionWriter::CloseIfIdle() {
  absl::MutexLock l(&mu_);
  if (state_ == State::kWriting) return false;
  state_ = State::kClosed;
  return true;
}

}  // namespace lockd
