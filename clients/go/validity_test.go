package lockd

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func readVectors(t *testing.T, name string, into any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("clients/testdata/%s is not in this tree", name)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatal(err)
	}
}

// The shared vectors every client's tests read (clients/testdata).
func TestLeaseValidityVectors(t *testing.T) {
	var raw struct {
		Unary        []map[string]any `json:"unary"`
		SessionBreak []map[string]any `json:"session_break"`
		SessionSafe  []map[string]any `json:"session_safe"`
	}
	readVectors(t, "lease_validity.json", &raw)
	f := func(m map[string]any, k string) float64 { return m[k].(float64) }
	if len(raw.Unary) == 0 || len(raw.SessionBreak) == 0 || len(raw.SessionSafe) == 0 {
		t.Fatal("a table of lease_validity.json is empty")
	}
	epoch := time.Now()
	near := func(got time.Time, wantMs float64) bool {
		return math.Abs(float64(got.Sub(epoch))/float64(time.Millisecond)-wantMs) < 1e-3
	}
	for i, r := range raw.Unary {
		ttl := ms(f(r, "ttl_ms"))
		d := drift(ttl, f(r, "clock_drift_factor"), ms(f(r, "min_clock_drift_ms")))
		got := unaryValidUntil(epoch.Add(ms(f(r, "send_ms"))), ttl, d)
		if !near(got, f(r, "valid_until_ms")) {
			t.Errorf("unary[%d]: valid until %v, want %vms", i, got.Sub(epoch), f(r, "valid_until_ms"))
		}
	}
	for i, r := range raw.SessionBreak {
		ttl := ms(f(r, "ttl_ms"))
		d := drift(ttl, f(r, "clock_drift_factor"), ms(f(r, "min_clock_drift_ms")))
		got := sessionBreakValidUntil(epoch.Add(ms(f(r, "break_noticed_ms"))), ms(f(r, "hang_bound_ms")), ttl, d)
		if !near(got, f(r, "valid_until_ms")) {
			t.Errorf("session_break[%d]: valid until %v, want %vms", i, got.Sub(epoch), f(r, "valid_until_ms"))
		}
	}
	for i, r := range raw.SessionSafe {
		ttl := ms(f(r, "ttl_ms"))
		d := drift(ttl, f(r, "clock_drift_factor"), ms(f(r, "min_clock_drift_ms")))
		if got, want := sessionSafe(ttl, d, ms(f(r, "hang_bound_ms"))), r["session_safe"].(bool); got != want {
			t.Errorf("session_safe[%d]: %v, want %v", i, got, want)
		}
	}
}

func TestAcquirePathVectors(t *testing.T) {
	type acquire struct {
		TTLMs      float64 `json:"ttl_ms"`
		OtherOwner bool    `json:"other_owner"`
		AutoRenew  *bool   `json:"auto_renew"`
		Path       string  `json:"path"`
		Then       *struct {
			Event   string  `json:"event"`
			LeaseMs float64 `json:"lease_ms"`
		} `json:"then"`
	}
	type clientOpts struct {
		UseSessions   *bool    `json:"use_sessions"`
		KeepaliveMs   *float64 `json:"keepalive_time_ms"`
		KeepaliveToMs *float64 `json:"keepalive_timeout_ms"`
		Factor        *float64 `json:"clock_drift_factor"`
		MinDriftMs    *float64 `json:"min_clock_drift_ms"`
	}
	var v struct {
		Defaults clientOpts `json:"client_defaults"`
		Rows     []struct {
			Row      string     `json:"row"`
			Client   clientOpts `json:"client"`
			Acquires []acquire  `json:"acquires"`
		} `json:"rows"`
	}
	readVectors(t, "acquire_paths.json", &v)
	if len(v.Rows) == 0 {
		t.Fatal("acquire_paths.json has no rows")
	}
	apply := func(o *options, c clientOpts) {
		if c.UseSessions != nil {
			o.useSessions = *c.UseSessions
		}
		if c.KeepaliveMs != nil {
			o.keepaliveTime = ms(*c.KeepaliveMs)
		}
		if c.KeepaliveToMs != nil {
			o.keepaliveTO = ms(*c.KeepaliveToMs)
		}
		if c.Factor != nil {
			o.driftFactor = *c.Factor
		}
		if c.MinDriftMs != nil {
			o.minDrift = ms(*c.MinDriftMs)
		}
	}
	for _, row := range v.Rows {
		o := defaultOptions()
		apply(&o, v.Defaults)
		apply(&o, row.Client)
		c := &Client{o: o}
		s := newSession(c)
		for i, a := range row.Acquires {
			autoRenew := a.AutoRenew == nil || *a.AutoRenew
			got := choosePath(pathInput{useSessions: o.useSessions, ownerIsClients: !a.OtherOwner,
				autoRenew: autoRenew, ttl: ms(a.TTLMs)}, s)
			want := map[string]path{"session": pathSession, "unary": pathUnary}[a.Path]
			if got != want {
				t.Errorf("%s: acquire %d (ttl %vms): path %v, want %s", row.Row, i, a.TTLMs, got, a.Path)
			}
			if a.Then != nil {
				switch a.Then.Event {
				case "no_session_stream":
					s.unsupported = true
				case "session_opened":
					s.grantedTTL = ms(a.Then.LeaseMs)
				default:
					t.Fatalf("%s: unknown event %q", row.Row, a.Then.Event)
				}
			}
		}
	}
}
