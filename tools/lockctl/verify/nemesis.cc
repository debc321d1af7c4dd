#include "tools/lockctl/verify/nemesis.h"

#include "absl/strings/str_cat.h"

namespace lockd::lockctl::verify {

const char* NemesisName(NemesisKind kind) {
  switch (kind) {
    case NemesisKind::kNone:
      return "none";
    case NemesisKind::kKillHolders:
      return "kill-holders";
    case NemesisKind::kAbandon:
      return "abandon";
    case NemesisKind::kPauseHolders:
      return "pause-holders";
  }
  return "?";
}

absl::StatusOr<NemesisKind> ParseNemesis(absl::string_view text) {
  for (NemesisKind k : {NemesisKind::kNone, NemesisKind::kKillHolders, NemesisKind::kAbandon,
                        NemesisKind::kPauseHolders}) {
    if (text == NemesisName(k)) return k;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--nemesis must be none, kill-holders, abandon or pause-holders, not \"", text, "\""));
}

std::optional<int> NemesisPolicy::Pick(absl::Time now, const std::vector<int>& candidates) {
  if (kind_ == NemesisKind::kNone || now < next_ || candidates.empty()) return std::nullopt;
  next_ = now + interval_;
  std::uniform_int_distribution<size_t> pick(0, candidates.size() - 1);
  return candidates[pick(rng_)];
}

}  // namespace lockd::lockctl::verify
