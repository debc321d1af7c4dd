// TLS and mutual TLS of the gRPC port, the plaintext health port and server
// certificate rotation, through real TLS handshakes with a real lockd
// process and certificates made by openssl in the test.

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "tests/integration/security/security_test_util.h"
#include "tests/support/lockd_process.h"
#include "tests/support/process.h"
#include "tests/support/status_matchers.h"

namespace lockd::testing {
namespace {

using ::testing::HasSubstr;

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err = MakeTestCerts(dir_.path());
    ASSERT_EQ(err, "") << "openssl failed: " << err;
  }

  std::string File(const std::string& name) const { return absl::StrCat(dir_.path(), "/", name); }

  ChannelSpec Client(const std::string& name, const std::string& ca = "ca.pem") const {
    return {File(ca), File(name + ".pem"), File(name + ".key"), ""};
  }

  void StartLockd(const std::vector<std::string>& extra) {
    std::vector<std::string> flags = {"--backend=memory",
                                      absl::StrCat("--tls.cert_file=", File("server.pem")),
                                      absl::StrCat("--tls.key_file=", File("server.key"))};
    flags.insert(flags.end(), extra.begin(), extra.end());
    auto p = LockdProcess::Start(flags, dir_.path());
    ASSERT_TRUE(p.ok()) << p.status();
    lockd_ = *std::move(p);
  }

  // Describe of a free lock over a new connection made with `spec`.
  grpc::Status Describe(const ChannelSpec& spec, const std::string& ns = "") {
    auto stub = v1::LockService::NewStub(Channel(lockd_->address(), spec));
    v1::DescribeRequest req;
    req.set_namespace_(ns);
    req.set_name("tls-probe");
    v1::LockInfo info;
    return stub->Describe(Ctx(spec.token).get(), req, &info);
  }

  TempDir dir_;
  std::unique_ptr<LockdProcess> lockd_;
};

TEST_F(TlsTest, TlsClientTrustingTheCaIsServed) {
  StartLockd({});
  EXPECT_TRUE(Describe({File("ca.pem"), "", "", ""}).ok());
}

TEST_F(TlsTest, PlaintextClientCannotTalkToTheTlsPort) {
  StartLockd({});
  grpc::Status s = Describe({});
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::UNAVAILABLE));
}

TEST_F(TlsTest, ClientTrustingAnotherCaRejectsTheServer) {
  StartLockd({});
  grpc::Status s = Describe({File("ca2.pem"), "", "", ""});
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::UNAVAILABLE));
}

TEST_F(TlsTest, RequiredClientCertificateMustBeValidAndFromTheClientCa) {
  StartLockd({absl::StrCat("--tls.client_ca_file=", File("ca.pem")), "--tls.client_auth=require"});
  EXPECT_TRUE(Describe(Client("client-a")).ok());
  EXPECT_THAT(Describe({File("ca.pem"), "", "", ""}), StatusIs(grpc::StatusCode::UNAVAILABLE))
      << "no client certificate";
  EXPECT_THAT(Describe(Client("expired")), StatusIs(grpc::StatusCode::UNAVAILABLE))
      << "expired client certificate";
  EXPECT_THAT(Describe(Client("other")), StatusIs(grpc::StatusCode::UNAVAILABLE))
      << "client certificate from another CA";
}

TEST_F(TlsTest, RequestedClientCertificateIsOptionalButVerifiedWhenSent) {
  StartLockd({absl::StrCat("--tls.client_ca_file=", File("ca.pem")), "--tls.client_auth=request"});
  EXPECT_TRUE(Describe({File("ca.pem"), "", "", ""}).ok());
  EXPECT_TRUE(Describe(Client("client-b")).ok());
  EXPECT_THAT(Describe(Client("other")), StatusIs(grpc::StatusCode::UNAVAILABLE));
  EXPECT_THAT(Describe(Client("expired")), StatusIs(grpc::StatusCode::UNAVAILABLE));
}

TEST_F(TlsTest, IdentityComesFromUriSanThenDnsSanThenCommonName) {
  // Each client may read only the namespace named after its identity, so a
  // denial message names the identity lockd saw.
  StartLockd({absl::StrCat("--tls.client_ca_file=", File("ca.pem")), "--tls.client_auth=require",
              "--auth.rules=[{identities: [spiffe://lockd.test/client-a], namespaces: [a], "
              "permissions: [read]}, {identities: [client-b.test], namespaces: [b], permissions: "
              "[read]}, {identities: [client-c], namespaces: [c], permissions: [read, admin]}]"});
  EXPECT_TRUE(Describe(Client("client-a"), "a").ok());
  EXPECT_TRUE(Describe(Client("client-b"), "b").ok());
  EXPECT_TRUE(Describe(Client("client-c"), "c").ok());
  grpc::Status s = Describe(Client("client-a"), "b");
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::PERMISSION_DENIED));
  EXPECT_THAT(s.error_message(), HasSubstr("\"spiffe://lockd.test/client-a\""));
  EXPECT_THAT(s.error_message(), HasSubstr("read"));
  s = Describe(Client("client-b"), "a");
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::PERMISSION_DENIED));
  EXPECT_THAT(s.error_message(), HasSubstr("\"client-b.test\""));
  s = Describe(Client("client-c"), "a");
  EXPECT_THAT(s.error_message(), HasSubstr("\"client-c\""));

  // ForceRelease is audited with the certificate's identity.
  auto stub = v1::LockService::NewStub(Channel(lockd_->address(), Client("client-c")));
  v1::ForceReleaseRequest req;
  req.set_namespace_("c");
  req.set_name("stuck job");
  req.set_reason("job 17 died");
  v1::ForceReleaseResponse resp;
  ASSERT_TRUE(stub->ForceRelease(Ctx().get(), req, &resp).ok());
  EXPECT_FALSE(resp.released());
  ASSERT_TRUE(WaitFor([&] { return absl::StrContains(lockd_->process().Log(), "force_release"); },
                      absl::Seconds(5)));
  std::string log = lockd_->process().Log();
  EXPECT_THAT(log, HasSubstr("audit=force_release identity=client-c namespace=c "
                             "name=\"stuck job\" reason=\"job 17 died\""));
  EXPECT_THAT(log, HasSubstr("audit=denied identity=spiffe://lockd.test/client-a permission=read "
                             "namespace=b"));
}

// Replaces `to` by a copy of `from` atomically (as a Secret volume update
// swaps its files).
void Replace(const std::string& from, const std::string& to) {
  std::string tmp = to + ".tmp";
  ASSERT_TRUE(WriteFile(tmp, ReadFileOrEmpty(from)).ok());
  ASSERT_EQ(std::rename(tmp.c_str(), to.c_str()), 0);
}

TEST_F(TlsTest, ServerCertificateRotationIsPickedUpByNewConnectionsWithoutRestart) {
  std::string cert = File("serving.pem"), key = File("serving.key");
  Replace(File("server.pem"), cert);
  Replace(File("server.key"), key);
  auto p = LockdProcess::Start({"--backend=memory", "--tls.cert_file=" + cert,
                                "--tls.key_file=" + key, "--tls.reload_interval=1s"},
                               dir_.path());
  ASSERT_TRUE(p.ok()) << p.status();
  lockd_ = *std::move(p);
  const ChannelSpec old_ca{File("ca.pem"), "", "", ""}, new_ca{File("ca2.pem"), "", "", ""};
  ASSERT_TRUE(Describe(old_ca).ok());
  ASSERT_FALSE(Describe(new_ca).ok());

  // The server keeps one open connection across the rotation.
  auto kept = v1::LockService::NewStub(Channel(lockd_->address(), old_ca));
  v1::DescribeRequest req;
  req.set_name("kept");
  v1::LockInfo info;
  ASSERT_TRUE(kept->Describe(Ctx().get(), req, &info).ok());

  Replace(File("server2.key"), key);
  Replace(File("server2.pem"), cert);
  EXPECT_TRUE(
      WaitFor([&] { return Describe(new_ca).ok(); }, absl::Seconds(20), absl::Milliseconds(200)))
      << "new connections never saw the rotated certificate";
  EXPECT_FALSE(Describe(old_ca).ok()) << "new connections still get the old certificate";
  EXPECT_TRUE(kept->Describe(Ctx().get(), req, &info).ok()) << "an established connection broke";
  EXPECT_TRUE(lockd_->process().Running());
}

TEST_F(TlsTest, HealthPortServesOnlyHealthInPlaintext) {
  int health_port = FreePort();
  StartLockd({absl::StrCat("--health.listen=127.0.0.1:", health_port)});
  std::string health_address = absl::StrCat("127.0.0.1:", health_port);
  auto health = grpc::health::v1::Health::NewStub(Channel(health_address, {}));
  for (const std::string& service : {std::string(""), std::string("lockd.v1.LockService")}) {
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status s = health->Check(Ctx().get(), req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING) << service;
  }
  grpc::health::v1::HealthCheckRequest unknown;
  unknown.set_service("no.such.Service");
  grpc::health::v1::HealthCheckResponse resp;
  EXPECT_THAT(health->Check(Ctx().get(), unknown, &resp), StatusIs(grpc::StatusCode::NOT_FOUND));

  // Nothing else is served there: no LockService, no reflection.
  auto stub = v1::LockService::NewStub(Channel(health_address, {}));
  v1::DescribeRequest req;
  req.set_name("x");
  v1::LockInfo info;
  EXPECT_THAT(stub->Describe(Ctx().get(), req, &info), StatusIs(grpc::StatusCode::UNIMPLEMENTED));
  // The health service is not on the TLS port's plaintext either.
  grpc::Status plain = Describe({});
  EXPECT_THAT(plain, StatusIs(grpc::StatusCode::UNAVAILABLE));
}

// gRPC's own log lines (here the refused handshake of a plaintext client)
// follow log.format like lockd's: with json, every line of lockd's log is
// one JSON object, and gRPC's line keeps its severity and source.
TEST_F(TlsTest, GrpcsOwnLogLinesFollowTheJsonLogFormat) {
  StartLockd({"--log.format=json"});
  EXPECT_THAT(Describe({}), StatusIs(grpc::StatusCode::UNAVAILABLE));
  ASSERT_TRUE(
      WaitFor([&] { return absl::StrContains(lockd_->process().Log(), "Handshake failed"); },
              absl::Seconds(10)))
      << lockd_->process().Log();
  int lines = 0, handshake = 0;
  for (absl::string_view line : absl::StrSplit(lockd_->process().Log(), '\n', absl::SkipEmpty())) {
    ++lines;
    google::protobuf::Struct object;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(std::string(line), &object).ok())
        << "not a JSON object: " << line;
    auto field = [&](const std::string& key) {
      auto it = object.fields().find(key);
      return it == object.fields().end() ? std::string("(none)") : it->second.string_value();
    };
    EXPECT_NE(field("ts"), "(none)") << line;
    EXPECT_NE(field("level"), "(none)") << line;
    if (!absl::StrContains(field("msg"), "Handshake failed")) continue;
    ++handshake;
    EXPECT_EQ(field("level"), "error") << line;
    EXPECT_EQ(field("logger"), "grpc") << line;
    EXPECT_THAT(field("source"), HasSubstr("ssl_transport_security.cc:")) << line;
  }
  EXPECT_GT(lines, 1);
  EXPECT_GE(handshake, 1);
}

}  // namespace
}  // namespace lockd::testing
