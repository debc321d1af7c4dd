package lockd

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
)

// Option configures a Client (New).
type Option func(*options) error

type options struct {
	owner          string
	namespace      string
	tls            *tls.Config
	bearerToken    string
	ttl            time.Duration
	rpcTimeout     time.Duration
	releaseTimeout time.Duration
	initialBackoff time.Duration
	maxBackoff     time.Duration
	driftFactor    float64
	minDrift       time.Duration
	keepaliveTime  time.Duration
	keepaliveTO    time.Duration
	useSessions    bool
	sessionTTL     time.Duration
	keepOnDisc     bool
	dial           []grpc.DialOption
}

func defaultOptions() options {
	return options{
		rpcTimeout:     10 * time.Second,
		releaseTimeout: 2 * time.Second,
		initialBackoff: 50 * time.Millisecond,
		maxBackoff:     2 * time.Second,
		driftFactor:    0.01,
		minDrift:       2 * time.Millisecond,
		keepaliveTime:  10 * time.Second,
		keepaliveTO:    2 * time.Second,
		useSessions:    true,
		keepOnDisc:     true,
	}
}

// WithOwner sets the owner id of every hold of the Client (1-256 bytes, see
// docs/api.md "Owner"). Default: "<hostname>-<pid>-<32 random hex>", unique
// per Client.
func WithOwner(owner string) Option {
	return func(o *options) error { o.owner = owner; return nil }
}

// WithNamespace sets the namespace of every lock the Client names. Default:
// the server's "default".
func WithNamespace(ns string) Option {
	return func(o *options) error { o.namespace = ns; return nil }
}

// WithTLS uses TLS with `cfg` (set Certificates for mutual TLS). Default:
// plaintext.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) error {
		if cfg == nil {
			return fmt.Errorf("lockd: WithTLS: nil config")
		}
		o.tls = cfg.Clone()
		return nil
	}
}

// WithTLSFiles uses TLS with the PEM files named: caFile the roots that
// sign lockd's certificate (empty: the system roots), certFile and keyFile
// the client certificate for mutual TLS (both or neither), serverName the
// name to verify instead of the target's host (may be empty). Errors name
// the file, never its contents.
func WithTLSFiles(caFile, certFile, keyFile, serverName string) Option {
	return func(o *options) error {
		cfg := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
		if caFile != "" {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return fmt.Errorf("lockd: TLS ca file: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return fmt.Errorf("lockd: TLS ca file %s: no PEM certificate", caFile)
			}
		}
		if (certFile == "") != (keyFile == "") {
			return fmt.Errorf("lockd: TLS: certFile and keyFile go together (got %q, %q)", certFile, keyFile)
		}
		if certFile != "" {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return fmt.Errorf("lockd: TLS client certificate %s / %s: %w", certFile, keyFile, err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		o.tls = cfg
		return nil
	}
}

// WithBearerToken sends `authorization: Bearer <token>` with every call
// (lockd's auth.tokens_file). Use TLS: on plaintext the token can be read
// on the network.
func WithBearerToken(token string) Option {
	return func(o *options) error {
		if token == "" || strings.ContainsAny(token, "\r\n") {
			return fmt.Errorf("lockd: WithBearerToken: empty token or one with a line break")
		}
		o.bearerToken = token
		return nil
	}
}

// WithLeaseTTL sets the lease of every hold (docs/api.md "Lease"). Default
// zero: the server's default (30 s). Over a session the server renews it
// while the stream is up; it is how long a hold outlives a broken stream.
func WithLeaseTTL(ttl time.Duration) Option {
	return func(o *options) error {
		if ttl < 0 {
			return fmt.Errorf("lockd: WithLeaseTTL: must not be negative (got %v)", ttl)
		}
		o.ttl = ttl
		return nil
	}
}

// WithRPCTimeout bounds every call that does not wait for a lock (release,
// describe, an undo), retries included. Default 10 s.
func WithRPCTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("lockd: WithRPCTimeout: must be positive (got %v)", d)
		}
		o.rpcTimeout = d
		return nil
	}
}

// WithReleaseTimeout bounds, capped at the RPC timeout, the undo of an
// acquire whose outcome the client did not learn. Default 2 s.
func WithReleaseTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("lockd: WithReleaseTimeout: must be positive (got %v)", d)
		}
		o.releaseTimeout = d
		return nil
	}
}

// WithKeepalive sets the HTTP/2 keepalive: a ping every `interval` (gRPC-Go
// raises it to at least 10 s) and the connection closed when a ping is not
// answered within `timeout`. It is how a session notices a lockd replica
// that hangs: K = interval + timeout bounds that (see "Disconnects" in the
// package documentation). Default 10 s and 2 s.
func WithKeepalive(interval, timeout time.Duration) Option {
	return func(o *options) error {
		if interval <= 0 || timeout <= 0 {
			return fmt.Errorf("lockd: WithKeepalive: interval and timeout must be positive (got %v, %v)", interval, timeout)
		}
		o.keepaliveTime, o.keepaliveTO = interval, timeout
		return nil
	}
}

// WithClockDrift sets the validity margin drift = ttl*factor + min
// (Redlock's clock-drift allowance). Default 0.01 and 2 ms.
func WithClockDrift(factor float64, min time.Duration) Option {
	return func(o *options) error {
		if factor < 0 || factor >= 1 || min < 0 {
			return fmt.Errorf("lockd: WithClockDrift: factor in [0, 1) and min >= 0 (got %v, %v)", factor, min)
		}
		o.driftFactor, o.minDrift = factor, min
		return nil
	}
}

// WithBackoff sets the retry backoff after UNAVAILABLE: it starts at
// initial and doubles up to max, each pause jittered in [b/2, b]. Default
// 50 ms and 2 s.
func WithBackoff(initial, max time.Duration) Option {
	return func(o *options) error {
		if initial <= 0 || max < initial {
			return fmt.Errorf("lockd: WithBackoff: need 0 < initial <= max (got %v, %v)", initial, max)
		}
		o.initialBackoff, o.maxBackoff = initial, max
		return nil
	}
}

// WithoutSessions makes every call use the unary RPCs, each hold renewed
// by a goroutine of its own, instead of the Client's session stream.
func WithoutSessions() Option {
	return func(o *options) error { o.useSessions = false; return nil }
}

// WithSessionTTL sets the lease of the session's holds. Default zero: the
// lease of the first acquire that uses the session (WithLeaseTTL or the
// lock's LeaseTTL, else the server's default). Acquires asking another lease
// use the unary path.
func WithSessionTTL(ttl time.Duration) Option {
	return func(o *options) error {
		if ttl < 0 {
			return fmt.Errorf("lockd: WithSessionTTL: must not be negative (got %v)", ttl)
		}
		o.sessionTTL = ttl
		return nil
	}
}

// WithKeepOnDisconnect(false) makes lockd free the session's holds at once
// when the stream breaks (a crashed process frees its locks at once, but a
// network break loses them). Default true: they are left to their lease and
// resumed by the reconnected session.
func WithKeepOnDisconnect(keep bool) Option {
	return func(o *options) error { o.keepOnDisc = keep; return nil }
}

// WithDialOptions adds gRPC dial options (after the Client's own).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) error { o.dial = append(o.dial, opts...); return nil }
}
