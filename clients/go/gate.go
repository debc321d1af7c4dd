package lockd

import (
	"context"
	"sort"
	"sync"
)

// gate is a Client's local read-write lock on one name. lockd sees one
// owner per Client and a lock is reentrant per owner, so goroutines of one
// Client exclude each other here first: an exclusive holder (a Mutex, a
// writer, a semaphore hold) alone, shared holders (readers) together.
// Waits end with ctx. Thread-safe (mu).
type gate struct {
	mu      sync.Mutex
	users   int // Client.gates reference count
	readers int
	writer  bool
	changed chan struct{} // closed and replaced on every release
}

// gateFor returns the gate of key (counted: give it back with putGate).
func (c *Client) gateFor(key string) *gate {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.gates[key]
	if g == nil {
		g = &gate{changed: make(chan struct{})}
		c.gates[key] = g
	}
	g.users++
	return g
}

func (c *Client) putGate(key string, g *gate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g.users--; g.users == 0 {
		delete(c.gates, key)
	}
}

func (g *gate) try(shared bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.writer || (!shared && g.readers > 0) {
		return false
	}
	if shared {
		g.readers++
	} else {
		g.writer = true
	}
	return true
}

// lock waits until the gate is taken (true) or ctx ends (false).
func (g *gate) lock(ctx context.Context, shared bool) bool {
	for {
		g.mu.Lock()
		ch := g.changed
		g.mu.Unlock()
		if g.try(shared) {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

func (g *gate) unlock(shared bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if shared {
		g.readers--
	} else {
		g.writer = false
	}
	close(g.changed)
	g.changed = make(chan struct{})
}

// gates holds the local gates of several locks (AcquireAll), taken in key
// order so that two calls never deadlock each other.
type gates struct {
	c      *Client
	keys   []string
	gs     []*gate
	shared []bool
}

func gateKey(ns, name string) string { return ns + "\x00" + name }

func (c *Client) takeGates(ctx context.Context, refs []lockRef, try bool) (*gates, bool) {
	idx := make([]int, len(refs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		return gateKey(refs[idx[a]].ns, refs[idx[a]].name) < gateKey(refs[idx[b]].ns, refs[idx[b]].name)
	})
	gs := &gates{c: c}
	for _, i := range idx {
		key := gateKey(refs[i].ns, refs[i].name)
		g := c.gateFor(key)
		ok := false
		if try {
			ok = g.try(refs[i].shared)
		} else {
			ok = g.lock(ctx, refs[i].shared)
		}
		if !ok {
			c.putGate(key, g)
			gs.release()
			return nil, false
		}
		gs.keys, gs.gs, gs.shared = append(gs.keys, key), append(gs.gs, g), append(gs.shared, refs[i].shared)
	}
	return gs, true
}

func (gs *gates) release() {
	for i, g := range gs.gs {
		g.unlock(gs.shared[i])
		gs.c.putGate(gs.keys[i], g)
	}
	gs.gs = nil
}
