// The Go worker of cross_language_test.py: TARGET NAME COUNTER_FILE
// ITERATIONS, as worker.cc does it, with lockd.Client.Mutex.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	lockd "github.com/lockd/lockd/clients/go"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: worker TARGET NAME COUNTER_FILE ITERATIONS")
		os.Exit(1)
	}
	os.Exit(run(os.Args[1], os.Args[2], os.Args[3], os.Args[4]))
}

func run(target, name, path, iterations string) int {
	n, err := strconv.Atoi(iterations)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	c, err := lockd.New(ctx, target)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	m := c.Mutex(name)
	for i := 0; i < n; i++ {
		wait, cancel := context.WithTimeout(ctx, time.Minute)
		err := m.Lock(wait)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		var count, seen uint64
		b, err := os.ReadFile(path)
		if err == nil {
			_, err = fmt.Sscan(string(b), &count, &seen)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if m.Token() <= seen {
			fmt.Fprintf(os.Stderr, "fencing violation: token %d after %d\n", m.Token(), seen)
			return 3
		}
		time.Sleep(2 * time.Millisecond)
		if err := os.WriteFile(path+".go", []byte(fmt.Sprintf("%d %d\n", count+1, m.Token())), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := os.Rename(path+".go", path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := m.Unlock(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}
