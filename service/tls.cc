#include "service/tls.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace lockd {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

absl::Status CheckPrivateKey(const std::string& path) {
  File f(std::fopen(path.c_str(), "r"));
  if (f == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("tls.key_file: cannot read ", path));
  }
  EVP_PKEY* key = PEM_read_PrivateKey(f.get(), nullptr, nullptr, nullptr);
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls.key_file: ", path, " holds no PEM private key"));
  }
  EVP_PKEY_free(key);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<absl::Time> CertificateNotAfter(const std::string& path) {
  File f(std::fopen(path.c_str(), "r"));
  if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat("cannot read ", path));
  X509* cert = PEM_read_X509(f.get(), nullptr, nullptr, nullptr);
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(path, " holds no PEM certificate"));
  }
  struct tm tm = {};
  int ok = ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm);
  X509_free(cert);
  if (ok != 1) return absl::InvalidArgumentError(absl::StrCat(path, ": bad notAfter"));
  return absl::FromUnixSeconds(timegm(&tm));
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> NewServerCredentials(
    const Config::Tls& tls) {
  if (tls.cert_file.empty()) return grpc::InsecureServerCredentials();
  if (absl::StatusOr<absl::Time> t = CertificateNotAfter(tls.cert_file); !t.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("tls.cert_file: ", t.status().message()));
  }
  if (absl::Status s = CheckPrivateKey(tls.key_file); !s.ok()) return s;
  if (!tls.client_ca_file.empty()) {
    if (absl::StatusOr<absl::Time> t = CertificateNotAfter(tls.client_ca_file); !t.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("tls.client_ca_file: ", t.status().message()));
    }
  }
  unsigned interval =
      static_cast<unsigned>(std::max<int64_t>(1, absl::ToInt64Seconds(tls.reload_interval)));
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key_file, tls.cert_file, tls.client_ca_file, interval);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!tls.client_ca_file.empty()) options.watch_root_certs();
  if (tls.client_auth == "require") {
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else if (tls.client_auth == "request") {
    options.set_cert_request_type(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace lockd
