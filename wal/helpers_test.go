package wal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/wal"
)

// logBuffer collects a Log's zerolog lines; the writer goroutine logs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged lines at level.
func (b *logBuffer) lines(t testing.TB, level string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["level"] == level {
			out = append(out, m)
		}
	}
	return out
}

func (b *logBuffer) logger() zerolog.Logger { return zerolog.New(b) }

// openLog opens a log that is closed when the test ends.
func openLog(t testing.TB, dir string, opts wal.Options) *wal.Log {
	t.Helper()
	l, err := wal.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// record is the content the tests append at a given index: its length
// varies, and it names its index so a misplaced record shows.
func record(i int) []byte {
	return []byte(fmt.Sprintf("record-%d-%s", i, strings.Repeat("x", i*7%41)))
}

// readAll returns every durable record of l, from Pos 1 on.
func readAll(t testing.TB, l *wal.Log) map[wal.Pos][]byte {
	t.Helper()
	recs := map[wal.Pos][]byte{}
	prev := wal.Pos(0)
	if err := l.Read(1, func(p wal.Pos, rec []byte) error {
		if prev != 0 && p != prev+1 {
			return fmt.Errorf("Read gave Pos %d after %d", p, prev)
		}
		prev = p
		recs[p] = rec
		return nil
	}); err != nil {
		t.Fatalf("Read: %v", err)
	}
	return recs
}

// appendDurable appends recs and waits until they are durable.
func appendDurable(t testing.TB, l *wal.Log, recs ...[]byte) wal.Pos {
	t.Helper()
	p, err := l.Append(recs...)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.WaitDurable(ctx, p); err != nil {
		t.Fatalf("WaitDurable(%d): %v", p, err)
	}
	return p
}

func waitCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
