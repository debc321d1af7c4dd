package lockd_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	lockd "github.com/lockd/lockd/clients/go"
	"github.com/lockd/lockd/clients/go/election"
)

// The README's example (compiled with the tests, not run: it needs lockd).
func ExampleMutex() {
	ctx := context.Background()
	c, err := lockd.New(ctx, "lockd-0:7411,lockd-1:7411")
	if err != nil {
		panic(err)
	}
	defer c.Close()
	m := c.Mutex("orders/42")
	if err := m.Lock(ctx); err != nil {
		panic(err)
	}
	defer m.Unlock(ctx)
	select {
	case <-m.Done(): // the lease was lost: stop writing
		fmt.Println("lost:", m.Err())
	default:
		fmt.Println("charging order 42 with fencing token", m.Token())
	}
}

func ExampleMutex_TryLock() {
	ctx := context.Background()
	c, _ := lockd.New(ctx, "127.0.0.1:7411")
	defer c.Close()
	err := c.Mutex("nightly-report").TryLock(ctx)
	var e *lockd.Error
	if errors.Is(err, lockd.ErrLocked) && errors.As(err, &e) && e.Holder != nil {
		fmt.Println("already running, by", e.Holder.Owner)
	}
}

func ExampleClient_AcquireAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _ := lockd.New(ctx, "127.0.0.1:7411")
	defer c.Close()
	both, err := c.AcquireAll(ctx, []lockd.LockSpec{{Name: "account/1"}, {Name: "account/2"}})
	if err != nil {
		return
	}
	defer both.Release(ctx)
	fmt.Println("moving money with tokens", both.Leases[0].Token(), both.Leases[1].Token())
}

func ExampleSemaphore() {
	ctx := context.Background()
	c, _ := lockd.New(ctx, "127.0.0.1:7411")
	defer c.Close()
	permit, err := c.Semaphore("payments-api", 4).Acquire(ctx, 1)
	if err != nil {
		return
	}
	defer permit.Release(ctx)
	fmt.Println("calling payments-api with token", permit.Token())
}

func Example_election() {
	ctx := context.Background()
	c, _ := lockd.New(ctx, "dns:///lockd-headless:7411")
	defer c.Close()
	e := election.New(c, "controller-leader", lockd.LeaseTTL(15*time.Second))
	if err := e.Campaign(ctx, "pod-7"); err != nil { // waits until this pod leads
		return
	}
	go func() {
		<-e.Done() // leadership lost: stop reconciling
	}()
	for leader := range e.Observe(ctx) { // every change of leader, elsewhere too
		fmt.Println("leader:", leader)
	}
}
