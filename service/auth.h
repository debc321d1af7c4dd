// Who is calling, and may they (docs/api.md "Identity", "Authorization").
//
// Identity: a bearer token (`authorization: Bearer TOKEN` metadata) found in
// the tokens file names the caller; otherwise a verified TLS client
// certificate does (its first URI SAN, e.g. a SPIFFE ID, else its first DNS
// SAN, else its subject CN); otherwise the caller is `anonymous`. A token
// that is not in the file, or a malformed `authorization` header, is
// UNAUTHENTICATED even where anonymous callers would be allowed.
//
// Authorization: with no rules every caller may do everything (the local
// default). Otherwise a call needs a rule matching its identity and
// namespace that grants the RPC's permission: PERMISSION_DENIED naming
// identity, permission and namespace if none does, or UNAUTHENTICATED when
// the caller presented no credential at all (anonymous) and no rule lets
// anonymous in. With `owner_prefix`, `lock` calls must also use an owner
// equal to the caller's identity or starting with "<identity>/" (so one
// service cannot release another's lock by guessing its owner); an Acquire
// without owner then gets "<identity>/<random>".
//
// Every denial is written to the audit log (service/audit.h) and counted.
// Thread-safe: rules are immutable; the token table is swapped atomically
// when the file changes (see TokenStore).

#ifndef LOCKD_SERVICE_AUTH_H_
#define LOCKD_SERVICE_AUTH_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/server_context.h"
#include "service/auth_config.h"

namespace lockd {

class Metrics;

inline constexpr absl::string_view kAnonymous = "anonymous";

// Bearer tokens read from a file of lines "TOKEN IDENTITY" (blank lines and
// lines starting with # are skipped; a token is any run of printable
// non-space ASCII). Thread-safe: Find() is lock-free (an atomic pointer to an
// immutable table); Reload() swaps in a new table when the file changed and
// keeps superseded tables until destruction, so a reader never sees one
// freed (the file changes rarely). Errors name the file and line, never a
// token.
class TokenStore {
 public:
  // Reads `path` now. kInvalidArgument if it cannot be read or parsed.
  static absl::StatusOr<std::unique_ptr<TokenStore>> Open(const std::string& path);

  // The identity of `token`, or nullopt.
  std::optional<std::string> Find(absl::string_view token) const;

  // Re-reads the file if its inode, size or modification time changed.
  // OK and unchanged if not. On an error the previous tokens stay in force.
  absl::Status ReloadIfChanged();

  size_t size() const;

 private:
  using Table = absl::flat_hash_map<std::string, std::string>;
  struct Stamp {
    int64_t ino = 0, size = 0, mtime_ns = 0;
    friend bool operator==(const Stamp& a, const Stamp& b) {
      return a.ino == b.ino && a.size == b.size && a.mtime_ns == b.mtime_ns;
    }
  };
  explicit TokenStore(std::string path) : path_(std::move(path)) {}
  static absl::StatusOr<Table> Parse(const std::string& path, const std::string& text);

  const std::string path_;
  std::atomic<const Table*> current_{nullptr};
  absl::Mutex mu_;
  Stamp stamp_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<const Table>> tables_ ABSL_GUARDED_BY(mu_);
};

// The identity in a verified client certificate of `ctx`'s connection
// (first URI SAN, else first DNS SAN, else CN), or nullopt without one.
std::optional<std::string> CertificateIdentity(const grpc::ServerContextBase& ctx);

// The namespaces Authorize allowed for one identity, permission and owner.
// The rules and the owner rule are fixed for the server's life, so a stream
// (a Session) keeps one memo and its later calls skip them (profiled: the
// rule match was most of a session op's authorization). Identify still runs
// on every call, since a reloaded tokens file may rename or revoke the
// caller; another identity, permission or owner starts the memo afresh.
// Only allowed outcomes are kept, so every denial is still audited and
// counted. At most kMaxNamespaces are kept (the rest are checked each time).
// Thread-safe: guarded by mu_.
class AuthorizeMemo {
 public:
  static constexpr size_t kMaxNamespaces = 16;

  AuthorizeMemo() = default;
  AuthorizeMemo(const AuthorizeMemo&) = delete;
  AuthorizeMemo& operator=(const AuthorizeMemo&) = delete;

 private:
  friend class Authorizer;

  // True if Add recorded `ns` for these identity, permission and owner.
  bool Has(absl::string_view identity, Permission permission, const std::string* owner,
           absl::string_view ns) const ABSL_LOCKS_EXCLUDED(mu_);
  void Add(absl::string_view identity, Permission permission, const std::string* owner,
           absl::string_view ns) ABSL_LOCKS_EXCLUDED(mu_);
  bool SameCallerLocked(absl::string_view identity, Permission permission,
                        const std::string* owner) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::string identity_ ABSL_GUARDED_BY(mu_);
  Permission permission_ ABSL_GUARDED_BY(mu_) = Permission::kLock;
  std::optional<std::string> owner_ ABSL_GUARDED_BY(mu_);  // nullopt: no owner was passed
  absl::flat_hash_set<std::string> namespaces_ ABSL_GUARDED_BY(mu_);
};

class Authorizer {
 public:
  // `tokens` may be null (no bearer tokens); `metrics` may be null.
  // `client_certificates`: the port verifies client certificates
  // (tls.client_auth request or require); otherwise none is looked for.
  Authorizer(std::vector<AuthRule> rules, bool owner_prefix, std::unique_ptr<TokenStore> tokens,
             Metrics* metrics, bool client_certificates = true);

  // False when there are no rules, no tokens and no owner rule: Authorize()
  // then always succeeds, and callers may skip it.
  bool enabled() const { return enabled_; }

  // The caller's identity: kUnauthenticated for a bad bearer token.
  absl::StatusOr<std::string> Identify(const grpc::ServerContextBase& ctx) const;

  // Checks that the caller may use `permission` on namespace `ns` (and, for
  // kLock with owner_prefix, that `owner` is theirs; pass nullptr to skip,
  // "" for an Acquire that lets the server choose). Returns the caller's
  // identity. Errors: kUnauthenticated, kPermissionDenied (messages name the
  // permission and namespace, never a token). Each denial is audited with
  // `name` and counted. With a `memo` (may be null), the same outcome, but
  // what the memo holds allowed is not checked against the rules again, and
  // an allowed call is added to it.
  absl::StatusOr<std::string> Authorize(const grpc::ServerContextBase& ctx, Permission permission,
                                        absl::string_view ns, absl::string_view name,
                                        const std::string* owner,
                                        AuthorizeMemo* memo = nullptr) const;

  // The owner an Acquire without one gets: "<identity>/<random>" with
  // owner_prefix, else a random id.
  std::string NewOwnerFor(absl::string_view identity) const;

  // True if a rule grants `permission` on `ns` to `identity`.
  bool Allowed(absl::string_view identity, Permission permission, absl::string_view ns) const;

  TokenStore* tokens() const { return tokens_.get(); }

 private:
  absl::Status Deny(absl::StatusCode code, absl::string_view identity, Permission permission,
                    absl::string_view ns, absl::string_view name, std::string message) const;

  const std::vector<AuthRule> rules_;
  const bool owner_prefix_;
  const std::unique_ptr<TokenStore> tokens_;
  Metrics* const metrics_;
  const bool client_certificates_;
  const bool enabled_;
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_AUTH_H_
