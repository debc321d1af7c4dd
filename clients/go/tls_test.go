package lockd

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockd/lockd/clients/go/internal/lockdtest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// writeCert writes a key and a certificate signed by parent (self-signed
// when parent is nil) as PEM files in dir; returns them for signing.
func writeCert(t *testing.T, dir, name string, tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{
		name + ".pem": {Type: "CERTIFICATE", Bytes: der},
		name + ".key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// Mutual TLS plus a bearer token against a lockd that requires both: the
// token's identity is authorized, a wrong token is UNAUTHENTICATED, a
// client without a certificate is refused.
func TestMutualTLSAndBearerToken(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ca, caKey := writeCert(t, dir, "ca", &x509.Certificate{SerialNumber: big.NewInt(1),
		Subject: pkix.Name{CommonName: "test ca"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	writeCert(t, dir, "server", &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject: pkix.Name{CommonName: "lockd"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		DNSNames: []string{"lockd.test"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, caKey)
	writeCert(t, dir, "client", &x509.Certificate{SerialNumber: big.NewInt(3),
		Subject: pkix.Name{CommonName: "some-client"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, caKey)
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("s3cret alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	srv := lockdtest.StartLockd(t, "--tls.cert_file="+p("server.pem"), "--tls.key_file="+p("server.key"),
		"--tls.client_ca_file="+p("ca.pem"), "--tls.client_auth=require", "--auth.tokens_file="+tokens,
		`--auth.rules=[{identities: [alice], namespaces: ["*"], permissions: [lock, read]}]`)
	mtls := WithTLSFiles(p("ca.pem"), p("client.pem"), p("client.key"), "lockd.test")

	c := newClient(t, srv.Addr, mtls, WithBearerToken("s3cret"))
	for _, name := range []string{"tls-session", "tls-unary"} {
		opts := []LockOption{}
		if name == "tls-unary" {
			opts = append(opts, LeaseTTL(5*time.Second))
		}
		m := c.Mutex(name, opts...)
		if err := m.Lock(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(name, err)
		}
		if err := m.Unlock(context.Background()); err != nil {
			t.Fatal(name, err)
		}
	}
	wrong := newClient(t, srv.Addr, mtls, WithBearerToken("guess"))
	if err := wrong.Mutex("tls-session").Lock(ctxT(t, 10*time.Second)); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token: %v", err)
	}
	anonymous := newClient(t, srv.Addr, mtls) // identity: the certificate's CN, which no rule admits
	if _, err := anonymous.Describe(ctxT(t, 10*time.Second), "tls-session"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("identity without a rule: %v", err)
	}
	noCert := newClient(t, srv.Addr, WithTLSFiles(p("ca.pem"), "", "", "lockd.test"), WithBearerToken("s3cret"),
		WithRPCTimeout(time.Second))
	if _, err := noCert.Describe(ctxT(t, 10*time.Second), "tls-session"); status.Code(err) != codes.Unavailable {
		t.Fatalf("no client certificate: %v", err)
	}
}
