#include "service/auth.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "service/audit.h"
#include "service/metrics.h"
#include "service/owner_id.h"

namespace lockd {
namespace {

std::optional<std::string> FirstProperty(const grpc::AuthContext& auth, const char* name) {
  std::vector<grpc::string_ref> values = auth.FindPropertyValues(name);
  for (const grpc::string_ref& v : values) {
    if (v.size() > 0) return std::string(v.data(), v.size());
  }
  return std::nullopt;
}

}  // namespace

// --- TokenStore ---------------------------------------------------------------

absl::StatusOr<TokenStore::Table> TokenStore::Parse(const std::string& path,
                                                    const std::string& text) {
  Table table;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("auth.tokens_file ", path, " line ", line_no, ": ", why));
    };
    if (parts.size() != 2) return bad("expected \"TOKEN IDENTITY\"");
    for (char c : parts[0]) {
      if (c <= ' ' || c > '~') return bad("the token holds a character outside printable ASCII");
    }
    if (parts[1].size() > 256) return bad("identity longer than 256 bytes");
    if (!table.emplace(parts[0], parts[1]).second) return bad("duplicate token");
  }
  return table;
}

absl::StatusOr<std::unique_ptr<TokenStore>> TokenStore::Open(const std::string& path) {
  std::unique_ptr<TokenStore> store(new TokenStore(path));
  absl::Status s = store->ReloadIfChanged();
  if (!s.ok()) return s;
  if (store->current_.load() == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("auth.tokens_file: cannot read ", path));
  }
  return store;
}

absl::Status TokenStore::ReloadIfChanged() {
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("auth.tokens_file: cannot read ", path_));
  }
  Stamp stamp{static_cast<int64_t>(st.st_ino), static_cast<int64_t>(st.st_size),
              static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  absl::MutexLock l(&mu_);
  if (current_.load() != nullptr && stamp == stamp_) return absl::OkStatus();
  std::ifstream in(path_);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("auth.tokens_file: cannot read ", path_));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<Table> table = Parse(path_, ss.str());
  if (!table.ok()) return table.status();
  tables_.push_back(std::make_unique<const Table>(*std::move(table)));
  current_.store(tables_.back().get(), std::memory_order_release);
  stamp_ = stamp;
  return absl::OkStatus();
}

std::optional<std::string> TokenStore::Find(absl::string_view token) const {
  const Table* t = current_.load(std::memory_order_acquire);
  if (t == nullptr) return std::nullopt;
  auto it = t->find(token);
  if (it == t->end()) return std::nullopt;
  return it->second;
}

size_t TokenStore::size() const {
  const Table* t = current_.load(std::memory_order_acquire);
  return t == nullptr ? 0 : t->size();
}

// --- Identity -------------------------------------------------------------------

std::optional<std::string> CertificateIdentity(const grpc::ServerContextBase& ctx) {
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return std::nullopt;
  // Only a certificate the server verified names the peer (client_auth
  // request/require); without one the context holds no x509 properties.
  if (FirstProperty(*auth, "x509_pem_cert") == std::nullopt) return std::nullopt;
  if (auto uri = FirstProperty(*auth, "peer_uri")) return uri;
  if (auto dns = FirstProperty(*auth, "peer_dns")) return dns;
  return FirstProperty(*auth, "x509_common_name");
}

// --- Authorizer -----------------------------------------------------------------

Authorizer::Authorizer(std::vector<AuthRule> rules, bool owner_prefix,
                       std::unique_ptr<TokenStore> tokens, Metrics* metrics,
                       bool client_certificates)
    : rules_(std::move(rules)),
      owner_prefix_(owner_prefix),
      tokens_(std::move(tokens)),
      metrics_(metrics),
      client_certificates_(client_certificates),
      enabled_(!rules_.empty() || owner_prefix_ || tokens_ != nullptr) {}

absl::StatusOr<std::string> Authorizer::Identify(const grpc::ServerContextBase& ctx) const {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it != md.end()) {
    absl::string_view value(it->second.data(), it->second.size());
    absl::string_view token = value;
    if (!absl::ConsumePrefix(&token, "Bearer ") && !absl::ConsumePrefix(&token, "bearer ")) {
      return absl::UnauthenticatedError("authorization metadata: expected \"Bearer TOKEN\"");
    }
    token = absl::StripAsciiWhitespace(token);
    std::optional<std::string> identity;
    if (tokens_ != nullptr) identity = tokens_->Find(token);
    if (!identity) return absl::UnauthenticatedError("bearer token not recognised");
    return *std::move(identity);
  }
  if (client_certificates_) {
    if (std::optional<std::string> id = CertificateIdentity(ctx)) return *std::move(id);
  }
  return std::string(kAnonymous);
}

bool Authorizer::Allowed(absl::string_view identity, Permission permission,
                         absl::string_view ns) const {
  if (rules_.empty()) return true;
  const uint8_t bit = static_cast<uint8_t>(permission);
  for (const AuthRule& r : rules_) {
    if ((r.permissions & bit) == 0) continue;
    bool id_ok = false;
    for (const std::string& p : r.identities) {
      if (GlobMatch(p, identity)) {
        id_ok = true;
        break;
      }
    }
    if (!id_ok) continue;
    for (const std::string& p : r.namespaces) {
      if (GlobMatch(p, ns)) return true;
    }
  }
  return false;
}

absl::Status Authorizer::Deny(absl::StatusCode code, absl::string_view identity,
                              Permission permission, absl::string_view ns, absl::string_view name,
                              std::string message) const {
  AuditDenial(identity, PermissionName(permission), ns, name, code, message);
  if (metrics_ != nullptr) {
    metrics_->AuthDenied(ns, permission, code == absl::StatusCode::kUnauthenticated);
  }
  return absl::Status(code, message);
}

bool AuthorizeMemo::SameCallerLocked(absl::string_view identity, Permission permission,
                                     const std::string* owner) const {
  return identity_ == identity && permission_ == permission &&
         (owner == nullptr ? !owner_.has_value() : owner_.has_value() && *owner_ == *owner);
}

bool AuthorizeMemo::Has(absl::string_view identity, Permission permission, const std::string* owner,
                        absl::string_view ns) const {
  absl::MutexLock l(&mu_);
  return SameCallerLocked(identity, permission, owner) && namespaces_.contains(ns);
}

void AuthorizeMemo::Add(absl::string_view identity, Permission permission, const std::string* owner,
                        absl::string_view ns) {
  absl::MutexLock l(&mu_);
  if (!SameCallerLocked(identity, permission, owner)) {
    identity_ = std::string(identity);
    permission_ = permission;
    owner_ = owner == nullptr ? std::nullopt : std::optional<std::string>(*owner);
    namespaces_.clear();
  }
  if (namespaces_.size() < kMaxNamespaces) namespaces_.emplace(ns);
}

absl::StatusOr<std::string> Authorizer::Authorize(const grpc::ServerContextBase& ctx,
                                                  Permission permission, absl::string_view ns,
                                                  absl::string_view name, const std::string* owner,
                                                  AuthorizeMemo* memo) const {
  absl::StatusOr<std::string> identity = Identify(ctx);
  if (!identity.ok()) {
    return Deny(absl::StatusCode::kUnauthenticated, "", permission, ns, name,
                std::string(identity.status().message()));
  }
  if (memo != nullptr && memo->Has(*identity, permission, owner, ns)) return identity;
  if (!Allowed(*identity, permission, ns)) {
    if (*identity == kAnonymous) {
      return Deny(absl::StatusCode::kUnauthenticated, *identity, permission, ns, name,
                  absl::StrCat("permission ", PermissionName(permission), " on namespace \"", ns,
                               "\" needs a credential (a client certificate or a bearer token)"));
    }
    return Deny(absl::StatusCode::kPermissionDenied, *identity, permission, ns, name,
                absl::StrCat("identity \"", *identity, "\" lacks permission ",
                             PermissionName(permission), " on namespace \"", ns, "\""));
  }
  if (owner_prefix_ && owner != nullptr && !owner->empty() && *owner != *identity &&
      !(absl::StartsWith(*owner, *identity) && (*owner)[identity->size()] == '/')) {
    return Deny(absl::StatusCode::kPermissionDenied, *identity, permission, ns, name,
                absl::StrCat("owner: must be \"", *identity, "\" or start with \"", *identity,
                             "/\" (auth.owner_prefix)"));
  }
  if (memo != nullptr) memo->Add(*identity, permission, owner, ns);
  return identity;
}

std::string Authorizer::NewOwnerFor(absl::string_view identity) const {
  if (!owner_prefix_) return NewOwnerId();
  return absl::StrCat(identity, "/", NewOwnerId());
}

}  // namespace lockd
