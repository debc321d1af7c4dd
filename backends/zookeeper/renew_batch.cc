#include "backends/zookeeper/renew_batch.h"

#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"

namespace lockd::zk {

void RenewBatch::RenewMany(std::vector<RenewParams> params, RenewManyCallback done) {
  if (params.empty()) {
    std::move(done)({});
    return;
  }
  auto join = std::make_shared<RenewJoin>(params.size(), std::move(done));
  std::vector<std::vector<Entry>> chunks(1);
  std::vector<size_t> direct;  // indexes renewed one by one
  absl::flat_hash_set<LockKey> batched;
  size_t bytes = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    RenewParams& p = params[i];
    std::optional<LeaseTracker::Known> known = leases_->Lookup(p.key, p.owner);
    if (!known.has_value() || known->expired ||
        !HolderWrites::OfHold(StatOf(known->czxid, 0), p.fencing_token) ||
        !batched.insert(p.key).second) {
      direct.push_back(i);
      continue;
    }
    Entry e;
    e.index = i;
    e.path = std::move(known->path);
    e.stat = StatOf(known->czxid, known->version);
    e.written = HolderWrites::RenewedData(known->data, p.ttl);
    e.params = std::move(p);
    size_t size = e.path.size() + EncodeNodeData(e.written).size() + kOpOverheadBytes;
    if (!chunks.back().empty() &&
        (chunks.back().size() == kMaxOpsPerMulti || bytes + size > kMaxMultiBytes)) {
      chunks.emplace_back();
      bytes = 0;
    }
    bytes += size;
    chunks.back().push_back(std::move(e));
  }
  for (size_t i : direct) RenewOne(i, std::move(params[i]), join);
  for (std::vector<Entry>& chunk : chunks) {
    if (!chunk.empty()) Submit(std::move(chunk), join);
  }
}

void RenewBatch::RenewOne(size_t index, RenewParams params,
                          const std::shared_ptr<RenewJoin>& join) {
  writes_->Renew(std::move(params),
                 [join, index](absl::StatusOr<RenewResult> r) { join->Done(index, std::move(r)); });
}

void RenewBatch::Submit(std::vector<Entry> chunk, const std::shared_ptr<RenewJoin>& join) {
  std::vector<Op> ops;
  ops.reserve(chunk.size());
  for (const Entry& e : chunk) {
    ops.push_back(Op::Set(e.path, EncodeNodeData(e.written), e.stat.version, nullptr));
  }
  const Clock::time_point sent = Clock::now();
  zk_->Submit(Op::Multi(std::move(ops), [this, chunk = std::move(chunk), join, sent](Result r) {
    int rc = MultiRc(r);
    for (const Entry& e : chunk) {
      if (rc == ZOK) {
        // A set bumps the data version by exactly one.
        struct Stat after = StatOf(e.stat.czxid, e.stat.version + 1);
        join->Done(e.index, writes_->Renewed(e.params, e.path, after, e.written, sent));
      } else if (IsTransient(rc)) {
        join->Done(e.index, HolderWrites::RenewError(e.params.key, rc));
      } else {
        // A lost race (or a refused request): nothing was written; each
        // renewal finds out for itself.
        RenewOne(e.index, e.params, join);
      }
    }
  }));
}

}  // namespace lockd::zk
