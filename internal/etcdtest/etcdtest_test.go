package etcdtest

import (
	"context"
	"testing"
	"time"
)

func TestOneMemberServes(t *testing.T) {
	start := time.Now()
	c := Start(t, 1)
	t.Logf("1 member serving after %v", time.Since(start))
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("got %v", resp.Kvs)
	}
}

// Quorum: one of three members down changes nothing; two down and the
// cluster refuses writes; back up and it serves again, with what was
// written before (the restarted members kept their data).
func TestThreeMembersQuorum(t *testing.T) {
	start := time.Now()
	c := Start(t, 3)
	t.Logf("3 members serving after %v", time.Since(start))
	cl := c.Client(t)
	// A write proposed just as the leader dies is lost with it and times
	// out at the server (etcd does not retry proposals), so writes are
	// retried until the deadline, as a real caller would.
	put := func(k, v string, timeout time.Duration) error {
		deadline := time.Now().Add(timeout)
		for {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			_, err := cl.Put(ctx, k, v)
			cancel()
			if err == nil || time.Now().After(deadline) {
				return err
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := put("a", "1", 5*time.Second); err != nil {
		t.Fatal(err)
	}

	killed := time.Now()
	c.Kill(0)
	if c.Running(0) {
		t.Fatal("member 0 still running after Kill")
	}
	if err := put("b", "2", 15*time.Second); err != nil {
		t.Fatalf("write with 2 of 3 members: %v", err)
	}
	t.Logf("first write after a kill done %v after it", time.Since(killed))

	c.Stop(1)
	if err := put("c", "3", 500*time.Millisecond); err == nil {
		t.Fatal("write succeeded with 1 of 3 members")
	}

	c.Restart(0)
	c.Restart(1)
	c.WaitReady(20 * time.Second)
	if err := put("d", "4", 10*time.Second); err != nil {
		t.Fatalf("write after quorum is back: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for k, want := range map[string]string{"a": "1", "b": "2", "d": "4"} {
		resp, err := cl.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
			t.Fatalf("%s: got %v, want %s", k, resp.Kvs, want)
		}
	}
}
