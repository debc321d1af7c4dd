// Helpers of the security integration tests: test certificates made by
// tests/support/make_test_certs.sh (openssl), and channels that present them.

#ifndef LOCKD_TESTS_INTEGRATION_SECURITY_SECURITY_TEST_UTIL_H_
#define LOCKD_TESTS_INTEGRATION_SECURITY_SECURITY_TEST_UTIL_H_

#include <sys/wait.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "tests/support/process.h"

namespace lockd::testing {

// Runs make_test_certs.sh into `dir`; returns "" or the failure.
inline std::string MakeTestCerts(const std::string& dir) {
  auto p = Subprocess::Start({"bash", LOCKD_CERTS_SCRIPT, dir}, absl::StrCat(dir, "/certs.log"));
  if (!p.ok()) return p.status().ToString();
  int status = (*p)->Wait(absl::Seconds(120));
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return (*p)->Log();
  return "";
}

struct ChannelSpec {
  std::string ca;    // roots file ("": plaintext channel)
  std::string cert;  // client certificate ("": none)
  std::string key;
  std::string token;  // bearer token ("": none)
};

// A fresh (unshared) channel to `address`, verifying the server as
// lockd.test. Each call makes its own connection, so it sees the server's
// current certificate.
inline std::shared_ptr<grpc::Channel> Channel(const std::string& address, const ChannelSpec& s) {
  static int n = 0;
  grpc::ChannelArguments args;
  args.SetInt("lockd.test.channel", n++);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (s.ca.empty()) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFileOrEmpty(s.ca);
    if (!s.cert.empty()) {
      ssl.pem_cert_chain = ReadFileOrEmpty(s.cert);
      ssl.pem_private_key = ReadFileOrEmpty(s.key);
    }
    args.SetSslTargetNameOverride("lockd.test");
    creds = grpc::SslCredentials(ssl);
  }
  return grpc::CreateCustomChannel(address, creds, args);
}

// A context with a 10 s deadline and, if given, the bearer token.
inline std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "") {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  return ctx;
}

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_INTEGRATION_SECURITY_SECURITY_TEST_UTIL_H_
