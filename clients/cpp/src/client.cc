#include "lockd/client.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "clients/cpp/src/acquire_path.h"
#include "clients/cpp/src/bearer_token.h"
#include "clients/cpp/src/cancellation.h"
#include "clients/cpp/src/client_core.h"
#include "clients/cpp/src/errors.h"
#include "clients/cpp/src/lease_state.h"
#include "clients/cpp/src/rpc.h"
#include "clients/cpp/src/target.h"
#include "clients/cpp/src/unary_acquire.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "protos/proto_duration.h"

namespace lockd {

using client_internal::AcquireCall;
using client_internal::AcquirePath;
using client_internal::ChooseAcquirePath;
using client_internal::ClientCore;
using client_internal::DescribeLock;
using client_internal::FromGrpc;
using client_internal::FromProto;
using client_internal::LeaseState;
using client_internal::LockTarget;
using client_internal::NewAcquireCall;
using client_internal::SteadyClock;
using client_internal::SteadyTime;
using client_internal::ToSteady;

namespace {

absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read TLS ", what, " ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read TLS ", what, " ", path));
  }
  return ss.str();
}

// One call of `method` (a read, or a Renew by owner), retried on
// UNAVAILABLE within rpc_timeout.
template <typename Request, typename Response>
grpc::Status RetriedCall(const ClientCore& core,
                         grpc::Status (client_internal::Stub::*method)(grpc::ClientContext*,
                                                                       const Request&, Response*),
                         const Request& req, Response* resp) {
  return client_internal::CallWithRetry(core.options(), core.channel(),
                                        SteadyClock::now() + ToSteady(core.options().rpc_timeout),
                                        [&](grpc::ClientContext* ctx) {
                                          resp->Clear();
                                          return (core.stub().*method)(ctx, req, resp);
                                        });
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> NewLockdChannel(absl::string_view target,
                                                               const TlsOptions& tls,
                                                               const AuthOptions& auth,
                                                               const KeepaliveOptions& keepalive) {
  if (target.empty()) return absl::InvalidArgumentError("lockd target address is empty");
  if (keepalive.time <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("keepalive.time must be positive");
  }
  if (keepalive.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("keepalive.timeout must be positive");
  }
  absl::StatusOr<client_internal::ChannelTarget> resolved =
      client_internal::ResolveChannelTarget(target);
  if (!resolved.ok()) return resolved.status();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // Keepalive pings on every connection, with or without calls and however
  // long no data flows (an idle session stream still needs them).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
              client_internal::ToGrpcMillis(client_internal::KeepaliveInterval(keepalive)));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, client_internal::ToGrpcMillis(keepalive.timeout));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Every replica the target names takes calls; a DNS TXT record cannot
  // switch the policy back.
  args.SetServiceConfigJSON(std::string(client_internal::kRoundRobinServiceConfig));
  args.SetInt(GRPC_ARG_SERVICE_CONFIG_DISABLE_RESOLUTION, 1);
  if (!resolved->authority.empty()) {
    args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, resolved->authority);
  }
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (!tls.enabled) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    if (tls.cert_file.empty() != tls.key_file.empty()) {
      return absl::InvalidArgumentError(
          "TLS client certificate and key must be given together (cert_file and key_file)");
    }
    grpc::SslCredentialsOptions ssl;
    if (!tls.ca_file.empty()) {
      absl::StatusOr<std::string> ca = ReadPemFile(tls.ca_file, "CA file");
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *std::move(ca);
    }
    if (!tls.cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadPemFile(tls.cert_file, "certificate file");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadPemFile(tls.key_file, "key file");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
    creds = grpc::SslCredentials(ssl);
  }
  std::string token = auth.bearer_token;
  if (token.empty() && !auth.bearer_token_file.empty()) {
    std::ifstream in(auth.bearer_token_file);
    if (!in) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read bearer token file ", auth.bearer_token_file));
    }
    std::getline(in, token);
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
    if (token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bearer token file ", auth.bearer_token_file, " is empty"));
    }
  }
  if (token.empty()) return grpc::CreateCustomChannel(resolved->target, creds, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(client_internal::NewBearerTokenInterceptor(std::move(token)));
  return grpc::experimental::CreateCustomChannelWithInterceptors(resolved->target, creds, args,
                                                                 std::move(interceptors));
}

namespace client_internal {

std::string NewClientOwner() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof(host), "unknown-host");
  }
  std::string h(host);
  if (h.size() > 64) h.resize(64);
  return absl::StrCat(h, "-", ::getpid(), "-", RandomHex(16));
}

ClientCore::ClientCore(std::shared_ptr<Stub> stub, std::shared_ptr<grpc::ChannelInterface> channel,
                       ClientOptions options)
    : stub_(std::move(stub)),
      channel_(std::move(channel)),
      options_([&] {
        if (options.owner.empty()) options.owner = NewClientOwner();
        return std::move(options);
      }()),
      watchdog_(std::make_shared<Watchdog>(stub_, channel_, options_)),
      session_(std::make_shared<SessionStream>(stub_, channel_, options_)) {}

ClientCore::~ClientCore() {
  session_->Shutdown();
  watchdog_->Shutdown();
}

std::string ClientCore::Namespace(absl::string_view ns) const {
  if (!ns.empty()) return std::string(ns);
  if (!options_.default_namespace.empty()) return options_.default_namespace;
  return "default";  // the server's default, spelled out so Lease::ns() names it
}

}  // namespace client_internal

// ---------------------------------------------------------------------------
// Lease

Lease::Lease(std::shared_ptr<ClientCore> core, std::shared_ptr<LeaseState> state)
    : core_(std::move(core)), state_(std::move(state)) {}

Lease::Lease(Lease&& other) noexcept
    : core_(std::move(other.core_)), state_(std::move(other.state_)) {}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr && state_->active())
      Release(core_->options().release_timeout).IgnoreError();
    core_ = std::move(other.core_);
    state_ = std::move(other.state_);
  }
  return *this;
}

Lease::~Lease() {
  if (state_ != nullptr && state_->active())
    Release(core_->options().release_timeout).IgnoreError();
}

namespace {
const std::string& EmptyString() {
  static const std::string* const kEmpty = new std::string();
  return *kEmpty;
}
}  // namespace

const std::string& Lease::ns() const { return state_ ? state_->ns : EmptyString(); }
const std::string& Lease::name() const { return state_ ? state_->name : EmptyString(); }
const std::string& Lease::owner() const { return state_ ? state_->owner : EmptyString(); }
uint64_t Lease::fencing_token() const { return state_ ? state_->fencing_token : 0; }
uint32_t Lease::hold_count() const { return state_ ? state_->hold_count : 0; }
absl::Duration Lease::ttl() const { return state_ ? state_->ttl : absl::ZeroDuration(); }
HoldMode Lease::mode() const { return state_ ? state_->mode : HoldMode::kExclusive; }
uint32_t Lease::limit() const { return state_ ? state_->limit : 0; }
uint32_t Lease::permits() const { return state_ ? state_->permits : 0; }

std::chrono::steady_clock::time_point Lease::valid_until() const {
  return state_ ? state_->valid_until() : SteadyTime();
}

absl::Duration Lease::validity_remaining() const {
  if (state_ == nullptr) return absl::ZeroDuration();
  return client_internal::FromSteady(state_->valid_until() - SteadyClock::now());
}

bool Lease::lost() const { return state_ != nullptr && state_->CheckExpiry(SteadyClock::now()); }

bool Lease::valid() const {
  if (state_ == nullptr || !state_->active()) return false;
  SteadyTime now = SteadyClock::now();
  return !state_->CheckExpiry(now) && now < state_->valid_until();
}

absl::Status Lease::lost_status() const {
  if (state_ == nullptr) return absl::OkStatus();
  state_->CheckExpiry(SteadyClock::now());
  return state_->lost_status();
}

bool Lease::active() const { return state_ != nullptr && state_->active(); }

absl::Status Lease::Renew() {
  if (state_ == nullptr) return absl::FailedPreconditionError("Renew() on an empty Lease");
  if (!state_->active()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lease of ", DescribeLock(state_->ns, state_->name), " was already released or detached"));
  }
  if (state_->CheckExpiry(SteadyClock::now())) return state_->lost_status();
  if (state_->session) return absl::OkStatus();  // the server renews it
  SteadyTime deadline =
      std::min(SteadyClock::now() + ToSteady(core_->options().rpc_timeout), state_->valid_until());
  absl::StatusOr<SteadyTime> sent = client_internal::RenewLease(core_->stub(), *state_, deadline);
  if (!sent.ok()) return sent.status();
  core_->watchdog().Renewed(state_.get(), *sent);
  return absl::OkStatus();
}

namespace {

// Lease::Release of `state`, also used to give back a grant that a cancel
// overtook (AcquireLeases).
absl::Status ReleaseState(ClientCore& core, LeaseState& state, absl::Duration timeout) {
  LeaseState::EndResult end = state.End(SteadyClock::now());
  core.watchdog().Remove(&state);
  if (state.session) core.session().Forget(&state);
  if (!end.was_active) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lease of ", DescribeLock(state.ns, state.name), " was already released or detached"));
  }
  // A lost lease is not released: if the server still has the hold, it ends
  // within the drift margin anyway, and a release could instead take away a
  // hold that the same owner was granted again meanwhile.
  if (!end.lost.ok()) return end.lost;
  if (timeout <= absl::ZeroDuration()) timeout = core.options().rpc_timeout;
  const SteadyTime deadline = SteadyClock::now() + ToSteady(timeout);
  absl::StatusOr<ReleaseOutcome> r =
      state.session
          ? core.session().Release(state, deadline)
          : client_internal::ReleaseHold(core.stub(), core.channel(), core.options(), state.ns,
                                         state.name, state.owner, state.fencing_token, deadline);
  if (r.ok()) return absl::OkStatus();
  if (IsLockLost(r.status())) {
    absl::Status lost = client_internal::LockLostError(
        "LOCK_NOT_HELD", absl::StrCat("lease of ", DescribeLock(state.ns, state.name),
                                      " had been lost before Release(): ", r.status().message()));
    state.SetLostAfterEnd(lost);
    return lost;
  }
  return r.status();
}

}  // namespace

absl::Status Lease::Release(absl::Duration timeout) {
  if (state_ == nullptr) return absl::FailedPreconditionError("Release() on an empty Lease");
  return ReleaseState(*core_, *state_, timeout);
}

void Lease::Detach() {
  if (state_ == nullptr) return;
  state_->End(SteadyClock::now());
  core_->watchdog().Remove(state_.get());
  if (state_->session) core_->session().Forget(state_.get());
}

// ---------------------------------------------------------------------------
// LeaseSet

bool LeaseSet::valid() const {
  if (leases_.empty()) return false;
  for (const Lease& lease : leases_) {
    if (!lease.valid()) return false;
  }
  return true;
}

bool LeaseSet::lost() const {
  for (const Lease& lease : leases_) {
    if (lease.lost()) return true;
  }
  return false;
}

absl::Status LeaseSet::Release(absl::Duration timeout) {
  absl::Status first;
  for (Lease& lease : leases_) {
    if (!lease.active()) continue;
    absl::Status s = lease.Release(timeout);
    if (first.ok()) first = s;
  }
  return first;
}

// ---------------------------------------------------------------------------
// Client

absl::StatusOr<Client> Client::Connect(absl::string_view target, ClientOptions options,
                                       const TlsOptions& tls, const AuthOptions& auth) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      NewLockdChannel(target, tls, auth, options.keepalive);
  if (!channel.ok()) return channel.status();
  return Client(*std::move(channel), std::move(options));
}

Client::Client(std::shared_ptr<grpc::ChannelInterface> channel, ClientOptions options)
    : core_(std::make_shared<ClientCore>(
          std::shared_ptr<v1::LockService::StubInterface>(v1::LockService::NewStub(channel)),
          channel, std::move(options))) {}

Client::Client(std::shared_ptr<v1::LockService::StubInterface> stub, ClientOptions options)
    : core_(std::make_shared<ClientCore>(std::move(stub), nullptr, std::move(options))) {}

Client::Client(std::shared_ptr<ClientCore> core) : core_(std::move(core)) {}

Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

const std::string& Client::owner() const { return core_->options().owner; }

absl::StatusOr<Lease> Client::TryAcquire(absl::string_view name, AcquireOptions options) {
  options.wait = absl::ZeroDuration();
  return Acquire(name, std::move(options));
}

namespace {

// `call` on the path ChooseAcquirePath picks.
absl::StatusOr<std::vector<std::shared_ptr<LeaseState>>> AcquireOnPath(ClientCore& core,
                                                                       AcquireCall call) {
  if (ChooseAcquirePath(core, call) == AcquirePath::kSession) {
    absl::StatusOr<std::vector<std::shared_ptr<LeaseState>>> held = core.session().Acquire(call);
    // kUnimplemented: a lockd without the Session stream. Nothing was sent;
    // this call and every later one go unary (ChooseAcquirePath).
    if (held.ok() || held.status().code() != absl::StatusCode::kUnimplemented) return held;
  }
  return client_internal::UnaryAcquire(core, std::move(call));
}

// The one acquire of every kind, and where a cancel (AcquireOptions::cancel)
// becomes its kCancelled: before the call nothing is sent; a failure is
// reported as cancelled (each path stops waiting at the cancel and undoes
// its attempt); a grant the cancel overtook is released.
absl::StatusOr<std::vector<std::shared_ptr<LeaseState>>> AcquireLeases(
    const std::shared_ptr<ClientCore>& core, absl::StatusOr<AcquireCall> call) {
  if (!call.ok()) return call.status();
  const CancellationToken cancel = call->cancel;
  const std::string what = client_internal::DescribeCall(*call);
  if (cancel.cancelled()) return client_internal::CancelledError(what);
  absl::StatusOr<std::vector<std::shared_ptr<LeaseState>>> held =
      AcquireOnPath(*core, *std::move(call));
  if (!cancel.cancelled()) return held;
  if (!held.ok()) {
    if (held.status().code() == absl::StatusCode::kCancelled) return held.status();
    return client_internal::CancelledError(what, held.status());
  }
  absl::Status released;
  for (const std::shared_ptr<LeaseState>& state : *held) {
    absl::Status r = ReleaseState(*core, *state, core->options().release_timeout);
    if (released.ok()) released = r;
  }
  return client_internal::CancelledError(what, released);
}

// AcquireLeases of one lock.
absl::StatusOr<std::shared_ptr<LeaseState>> AcquireOne(const std::shared_ptr<ClientCore>& core,
                                                       LockTarget lock, AcquireOptions options) {
  absl::StatusOr<std::vector<std::shared_ptr<LeaseState>>> held =
      AcquireLeases(core, NewAcquireCall(*core, {std::move(lock)}, std::move(options)));
  if (!held.ok()) return held.status();
  return std::move(held->front());
}

}  // namespace

absl::StatusOr<Lease> Client::Acquire(absl::string_view name, AcquireOptions options) {
  LockTarget lock;
  lock.name = std::string(name);
  absl::StatusOr<std::shared_ptr<LeaseState>> held =
      AcquireOne(core_, std::move(lock), std::move(options));
  if (!held.ok()) return held.status();
  return Lease(core_, *std::move(held));
}

absl::StatusOr<Lease> Client::AcquireShared(absl::string_view name, AcquireOptions options) {
  LockTarget lock;
  lock.name = std::string(name);
  lock.mode = HoldMode::kShared;
  absl::StatusOr<std::shared_ptr<LeaseState>> held =
      AcquireOne(core_, std::move(lock), std::move(options));
  if (!held.ok()) return held.status();
  return Lease(core_, *std::move(held));
}

absl::StatusOr<LeaseSet> Client::AcquireAll(const std::vector<LockSpec>& locks,
                                            AcquireOptions options) {
  std::vector<LockTarget> targets;
  for (const LockSpec& spec : locks) {
    targets.push_back({spec.ns, spec.name, spec.mode, spec.limit, spec.permits});
  }
  absl::StatusOr<std::vector<std::shared_ptr<LeaseState>>> held =
      AcquireLeases(core_, NewAcquireCall(*core_, std::move(targets), std::move(options),
                                          /*all=*/true));
  if (!held.ok()) return held.status();
  std::vector<Lease> leases;
  for (std::shared_ptr<LeaseState>& state : *held) leases.push_back(Lease(core_, std::move(state)));
  return LeaseSet(std::move(leases));
}

// ---------------------------------------------------------------------------
// Semaphore

Semaphore::Semaphore(const Client& client, std::string name, uint32_t limit, std::string ns)
    : core_(client.core_), name_(std::move(name)), ns_(std::move(ns)), limit_(limit) {}

absl::StatusOr<Lease> Semaphore::Acquire(uint32_t permits, AcquireOptions options) {
  if (limit_ < 1 || limit_ > kMaxSemaphoreLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("Semaphore limit must be 1-", kMaxSemaphoreLimit, ", not ", limit_));
  }
  if (permits < 1 || permits > limit_) {
    return absl::InvalidArgumentError(
        absl::StrCat("permits must be 1-", limit_, " (the limit), not ", permits));
  }
  options.ns = ns_;
  absl::StatusOr<std::shared_ptr<LeaseState>> held =
      AcquireOne(core_, {"", name_, HoldMode::kExclusive, limit_, permits}, std::move(options));
  if (!held.ok()) return held.status();
  return Lease(core_, *std::move(held));
}

absl::StatusOr<Lease> Semaphore::TryAcquire(uint32_t permits, AcquireOptions options) {
  options.wait = absl::ZeroDuration();
  return Acquire(permits, std::move(options));
}

absl::StatusOr<ReleaseOutcome> Client::Release(absl::string_view name, absl::string_view owner,
                                               absl::string_view ns, uint64_t fencing_token) {
  return client_internal::ReleaseHold(core_->stub(), core_->channel(), core_->options(),
                                      core_->Namespace(ns), name, owner, fencing_token,
                                      SteadyClock::now() + ToSteady(core_->options().rpc_timeout));
}

absl::StatusOr<ReleaseOutcome> Client::UndoAcquire(absl::string_view name, absl::string_view owner,
                                                   absl::string_view acquire_request_id,
                                                   absl::string_view ns, uint64_t fencing_token) {
  if (acquire_request_id.empty()) {
    return absl::InvalidArgumentError("acquire_request_id must not be empty");
  }
  return client_internal::UndoAcquire(core_->stub(), core_->channel(), core_->options(),
                                      core_->Namespace(ns), name, owner, acquire_request_id,
                                      SteadyClock::now() + ToSteady(core_->options().rpc_timeout),
                                      fencing_token);
}

absl::StatusOr<RenewOutcome> Client::Renew(absl::string_view name, absl::string_view owner,
                                           absl::Duration ttl, absl::string_view ns,
                                           uint64_t fencing_token) {
  if (ttl < absl::ZeroDuration()) return absl::InvalidArgumentError("ttl must not be negative");
  std::string n = core_->Namespace(ns);
  v1::RenewRequest req;
  req.set_namespace_(n);
  req.set_name(std::string(name));
  req.set_owner(std::string(owner));
  req.set_fencing_token(fencing_token);
  if (ttl > absl::ZeroDuration()) SetProtoDuration(ttl, req.mutable_lease_ttl());
  v1::RenewResponse resp;
  grpc::Status gs = RetriedCall(*core_, &client_internal::Stub::Renew, req, &resp);
  if (!gs.ok()) return FromGrpc("renew", n, name, gs);
  return RenewOutcome{FromProtoDuration(resp.lease_ttl()), resp.fencing_token()};
}

absl::StatusOr<LockInfo> Client::Describe(absl::string_view name, absl::string_view ns) {
  std::string n = core_->Namespace(ns);
  v1::DescribeRequest req;
  req.set_namespace_(n);
  req.set_name(std::string(name));
  v1::LockInfo resp;
  grpc::Status gs = RetriedCall(*core_, &client_internal::Stub::Describe, req, &resp);
  if (!gs.ok()) return FromGrpc("describe", n, name, gs);
  return FromProto(resp);
}

absl::StatusOr<ForceReleaseOutcome> Client::ForceRelease(absl::string_view name,
                                                         absl::string_view reason,
                                                         uint64_t fencing_token,
                                                         absl::string_view ns) {
  std::string n = core_->Namespace(ns);
  v1::ForceReleaseRequest req;
  req.set_namespace_(n);
  req.set_name(std::string(name));
  req.set_reason(std::string(reason));
  req.set_fencing_token(fencing_token);
  v1::ForceReleaseResponse resp;
  grpc::ClientContext ctx;
  client_internal::SetDeadline(&ctx, SteadyClock::now() + ToSteady(core_->options().rpc_timeout));
  grpc::Status gs = core_->stub().ForceRelease(&ctx, req, &resp);
  if (!gs.ok()) return FromGrpc("force-release", n, name, gs);
  ForceReleaseOutcome out;
  out.released = resp.released();
  out.previous = FromProto(resp.previous());
  return out;
}

absl::StatusOr<ListPage> Client::List(const ListOptions& options) {
  std::string n = core_->Namespace(options.ns);
  v1::ListRequest req;
  req.set_namespace_(n);
  req.set_prefix(options.prefix);
  req.set_page_size(options.page_size);
  req.set_page_token(options.page_token);
  v1::ListResponse resp;
  grpc::Status gs = RetriedCall(*core_, &client_internal::Stub::List, req, &resp);
  if (!gs.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(gs.error_code()),
                        absl::StrCat("lockd list of namespace ", n.empty() ? "default" : n,
                                     " prefix \"", options.prefix, "\": ", gs.error_message()));
  }
  ListPage page;
  for (const v1::LockInfo& info : resp.locks()) page.locks.push_back(FromProto(info));
  page.next_page_token = resp.next_page_token();
  return page;
}

}  // namespace lockd
