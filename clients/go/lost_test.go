package lockd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockd/lockd/clients/go/internal/lockdtest"
	lockdv1 "github.com/lockd/lockd/clients/go/lockdv1"
)

// An operator's ForceRelease: a session hold learns it from lockd's `lost`
// (reason FORCE_RELEASED), a unary one from its next renewal
// (LOCK_NOT_HELD); Done closes and Unlock reports the loss.
func TestForceReleasedHoldIsLost(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	for _, tc := range []struct {
		name, reason string
		opts         []Option
	}{
		{"session", "FORCE_RELEASED", nil},
		{"unary", reasonLockNotHeld, []Option{WithoutSessions(), WithLeaseTTL(3 * time.Second)}},
	} {
		c := newClient(t, srv.Addr, tc.opts...)
		m := c.Mutex("forced-" + tc.name)
		if err := m.Lock(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.stub.ForceRelease(ctxT(t, 5*time.Second), &lockdv1.ForceReleaseRequest{
			Namespace: "default", Name: "forced-" + tc.name, Reason: "test"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-m.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Done not closed after a ForceRelease", tc.name)
		}
		var e *Error
		if err := m.Err(); !errors.Is(err, ErrLeaseLost) || !errors.As(err, &e) || e.Reason != tc.reason {
			t.Fatalf("%s: Err: %v", tc.name, err)
		}
		if err := m.Unlock(context.Background()); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("%s: Unlock: %v", tc.name, err)
		}
	}
}
