#include "tools/lockctl/verify/history_sink.h"

#include <fstream>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lockd::lockctl::verify {

// PROVISIONAL until the checker's history format lands.
void HistorySink::Start(int64_t, const VerifyOptions&) {}
void HistorySink::AcquireInvoke(int64_t now, int process, const Op& op, bool, absl::Duration) {
  lines_.push_back(
      absl::StrCat(now, " ", process, " invoke acquire ", op.id, " ", OpKindName(op.kind)));
}
void HistorySink::AcquireOk(int64_t now, int process, uint64_t op_id,
                            const std::vector<uint64_t>& tokens, bool session, int64_t vu) {
  ++grants_;
  lines_.push_back(absl::StrCat(now, " ", process, " ok acquire ", op_id, " ",
                                absl::StrJoin(tokens, ","), " ", session, " ", vu));
}
void HistorySink::AcquireFail(int64_t now, int process, uint64_t op_id, const std::string& code,
                              bool uncertain, const std::string& message) {
  ++fails_;
  lines_.push_back(absl::StrCat(now, " ", process, uncertain ? " info" : " fail", " acquire ",
                                op_id, " ", code, " ", message));
}
void HistorySink::AcquireInfo(int64_t now, int process, uint64_t op_id, const std::string& why) {
  lines_.push_back(absl::StrCat(now, " ", process, " info acquire ", op_id, " ", why));
}
void HistorySink::Enter(int64_t now, int process, const std::string& name, uint64_t token,
                        OpKind kind, uint32_t limit, uint32_t permits, int64_t vu) {
  lines_.push_back(absl::StrCat(now, " ", process, " enter ", name, " ", token, " ",
                                OpKindName(kind), " ", limit, " ", permits, " ", vu));
}
void HistorySink::Read(int64_t now, int process, const std::string& name, uint64_t token, int64_t f,
                       int64_t u) {
  lines_.push_back(absl::StrCat(now, " ", process, " read ", name, " ", token, " ", f, " ", u));
}
void HistorySink::Write(int64_t now, int process, const std::string& name, uint64_t token,
                        int64_t f, int64_t u, bool accepted) {
  if (!accepted) ++stale_;
  lines_.push_back(
      absl::StrCat(now, " ", process, " write ", name, " ", token, " ", f, " ", u, " ", accepted));
}
void HistorySink::Exit(int64_t now, int process, const std::string& name, bool crashed) {
  lines_.push_back(absl::StrCat(now, " ", process, " exit ", name, " ", crashed));
}
void HistorySink::ReleaseInvoke(int64_t now, int process, uint64_t op_id, const Op&,
                                const std::vector<uint64_t>&) {
  lines_.push_back(absl::StrCat(now, " ", process, " invoke release ", op_id));
}
void HistorySink::ReleaseDone(int64_t now, int process, uint64_t op_id, const std::string& code,
                              const std::string& message) {
  lines_.push_back(
      absl::StrCat(now, " ", process, " done release ", op_id, " ", code, " ", message));
}
void HistorySink::ReleaseInfo(int64_t now, int process, uint64_t op_id, const std::string& why) {
  lines_.push_back(absl::StrCat(now, " ", process, " info release ", op_id, " ", why));
}
void HistorySink::Nemesis(int64_t now, const std::string& what, int process, const Op& op) {
  lines_.push_back(absl::StrCat(now, " nemesis ", what, " ", process, " ", op.id));
}
void HistorySink::Finish(int64_t now, const std::map<std::string, Referee::Counters>& counters,
                         int cleaned) {
  for (const auto& [name, c] : counters) {
    lines_.push_back(absl::StrCat(now, " counters ", name, " fenced=", c.fenced, "/",
                                  c.fenced_writes, " unfenced=", c.unfenced, "/", c.unfenced_writes,
                                  " stale_rejected=", c.stale_rejected));
  }
  lines_.push_back(absl::StrCat(now, " cleaned ", cleaned));
}
absl::Status HistorySink::WriteTo(const std::string& path) const {
  std::ofstream f(path);
  for (const std::string& l : lines_) f << l << "\n";
  return absl::OkStatus();
}
int HistorySink::Report(bool, std::ostream& out) const {
  out << "grants " << grants_ << " fails " << fails_ << " stale " << stale_ << "\n";
  return 0;
}

}  // namespace lockd::lockctl::verify
