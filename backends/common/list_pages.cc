#include "backends/common/list_pages.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace lockd {

ListResult PageOf(std::vector<LockState> held, uint32_t page_size) {
  ListResult out;
  out.locks = std::move(held);
  if (out.locks.size() > page_size) {
    out.locks.resize(page_size);
    out.next_page_token = out.locks.back().key.name;
  }
  return out;
}

namespace {

// One List call in progress.
struct Job {
  std::string ns;
  std::vector<std::string> names;
  uint32_t page_size;
  DescribeBatch batch;
  DescribeFn describe;
  Callback<ListResult> done;
  size_t next = 0;  // first name not described yet
  std::vector<LockState> held;
  absl::Mutex mu;
  size_t outstanding ABSL_GUARDED_BY(mu) = 0;
  std::vector<std::optional<LockState>> chunk ABSL_GUARDED_BY(mu);
  absl::Status error ABSL_GUARDED_BY(mu);
};

void DescribeNext(std::shared_ptr<Job> job);

// One answer of a chunk; the last one moves the job on.
void OnDescribed(std::shared_ptr<Job> job, size_t i, absl::StatusOr<LockState> s) {
  absl::Status error;
  {
    absl::MutexLock l(&job->mu);
    if (!s.ok()) {
      if (job->error.ok()) job->error = s.status();
    } else if (s->held) {
      job->chunk[i] = *std::move(s);
    }
    if (--job->outstanding > 0) return;
    error = job->error;
    for (auto& c : job->chunk) {
      if (c.has_value()) job->held.push_back(*std::move(c));
    }
  }
  if (!error.ok()) {
    std::move(job->done)(error);
    return;
  }
  DescribeNext(std::move(job));
}

void DescribeNext(std::shared_ptr<Job> job) {
  const size_t want = size_t{job->page_size} + 1;
  if (job->held.size() >= want || job->next >= job->names.size()) {
    std::move(job->done)(PageOf(std::move(job->held), job->page_size));
    return;
  }
  size_t n = std::clamp(want - job->held.size(), job->batch.min, job->batch.max);
  n = std::min(n, job->names.size() - job->next);
  size_t first = job->next;
  job->next += n;
  {
    absl::MutexLock l(&job->mu);
    job->outstanding = n;
    job->chunk.assign(n, std::nullopt);
    job->error = absl::OkStatus();
  }
  for (size_t i = 0; i < n; ++i) {
    job->describe(LockKey{job->ns, job->names[first + i]},
                  [job, i](absl::StatusOr<LockState> s) mutable {
                    OnDescribed(std::move(job), i, std::move(s));
                  });
  }
}

}  // namespace

void ListByDescribing(std::string ns, std::vector<std::string> names, uint32_t page_size,
                      DescribeFn describe, Callback<ListResult> done, DescribeBatch batch) {
  auto job = std::make_shared<Job>();
  job->ns = std::move(ns);
  job->names = std::move(names);
  job->page_size = page_size;
  job->batch = batch;
  job->describe = std::move(describe);
  job->done = std::move(done);
  DescribeNext(std::move(job));
}

}  // namespace lockd
