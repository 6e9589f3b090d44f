package shares

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/internal/datadriven"
)

// TestDataDriven replays testdata/*.txt against one Partition per file:
//
//	new start=N                                  a share partition at N
//	config lock=30s limit=5 locks=2000           the group's configuration (defaults: Kafka's)
//	at t=12s                                     the clock (from 0)
//	acquire member=a max=500 spans=0-9,10-10:skip  acquire from log spans (at or after End)
//	ack member=a [renew] 0-4:accept 5-7:release,reject,gap
//	                                             acknowledgement batches: one type, or one per offset
//	expire                                       release expired locks
//	leave member=a                               release what a member holds
//	truncate log-start=N                         retention removed records below N
//	reset offset=N                               AlterShareGroupOffsets
//	restart                                      Encode, then Decode (what survives)
//	state                                        start, end, every record in flight
//
// go test ./shares -run TestDataDriven -args -rewrite refreshes the
// expected output.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/*.txt", func(t *testing.T, path string) {
		var p *Partition
		cfg := Defaults()
		base := time.Unix(1_700_000_000, 0)
		now := base
		datadriven.RunFile(t, path, func(t *testing.T, c *datadriven.Case) string {
			dur := func(key string, def time.Duration) time.Duration {
				v, ok := c.Args[key]
				if !ok {
					return def
				}
				d, err := time.ParseDuration(v)
				if err != nil {
					t.Fatalf("%s: %s=%q: %v", c.Pos, key, v, err)
				}
				return d
			}
			num := func(key string, def int64) int64 {
				v, ok := c.Args[key]
				if !ok {
					return def
				}
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("%s: %s=%q is not a number", c.Pos, key, v)
				}
				return n
			}
			if p == nil && c.Cmd != "new" && c.Cmd != "config" {
				t.Fatalf("%s: new first", c.Pos)
			}
			switch c.Cmd {
			case "new":
				p = New(num("start", 0))
				return state(p, base)
			case "config":
				cfg.LockDuration = dur("lock", cfg.LockDuration)
				cfg.DeliveryCountLimit = int16(num("limit", int64(cfg.DeliveryCountLimit)))
				cfg.MaxRecordLocks = int(num("locks", int64(cfg.MaxRecordLocks)))
				return "ok"
			case "at":
				now = base.Add(dur("t", 0))
				return "ok"
			case "acquire":
				got := p.Acquire(now, c.Arg("member", "a"), parseSpans(t, c), int(num("max", 500)), cfg)
				var out []string
				for _, a := range got {
					out = append(out, fmt.Sprintf("%d-%d dc=%d", a.First, a.Last, a.DeliveryCount))
				}
				if len(out) == 0 {
					out = []string{"none"}
				}
				return "acquired " + strings.Join(out, " ") + "\n" + state(p, base)
			case "ack":
				code := p.Ack(now, c.Arg("member", "a"), parseAcks(t, c), c.Has("renew"), cfg)
				res := "ok"
				if code != 0 {
					res = kerr.ErrorForCode(code).(*kerr.Error).Message
				}
				return res + "\n" + state(p, base)
			case "expire":
				return fmt.Sprintf("changed=%v\n%s", p.Expire(now, cfg), state(p, base))
			case "leave":
				return fmt.Sprintf("changed=%v\n%s", p.ReleaseMember(c.Arg("member", "a"), cfg), state(p, base))
			case "truncate":
				p.Truncate(num("log-start", 0))
				return state(p, base)
			case "reset":
				p.Reset(num("offset", 0))
				return state(p, base)
			case "restart":
				var err error
				if p, err = Decode(p.Encode()); err != nil {
					t.Fatalf("%s: decode: %v", c.Pos, err)
				}
				return state(p, base)
			case "state":
				return state(p, base)
			}
			t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
			return ""
		})
	})
}

// state prints the partition: its window, then each record in flight.
func state(p *Partition, base time.Time) string {
	out := []string{fmt.Sprintf("start=%d end=%d", p.start, p.end)}
	for _, o := range slices.Sorted(maps.Keys(p.recs)) {
		r := p.recs[o]
		if r.acquired {
			out = append(out, fmt.Sprintf("  %d acquired by %s dc=%d until %v", o, r.member, r.count, r.expires.Sub(base)))
		} else {
			out = append(out, fmt.Sprintf("  %d available dc=%d", o, r.count))
		}
	}
	return strings.Join(out, "\n")
}

func parseSpans(t *testing.T, c *datadriven.Case) []Span {
	var out []Span
	for _, s := range strings.Split(c.Arg("spans", ""), ",") {
		if s == "" {
			continue
		}
		rng, skip := strings.CutSuffix(s, ":skip")
		first, last := parseRange(t, c, rng)
		out = append(out, Span{First: first, Last: last, Skip: skip})
	}
	return out
}

func parseRange(t *testing.T, c *datadriven.Case, s string) (int64, int64) {
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("%s: bad range %q", c.Pos, s)
	}
	return first, last
}

var ackTypes = map[string]int8{"gap": AckGap, "accept": AckAccept, "release": AckRelease, "reject": AckReject, "renew": AckRenew, "bad": 9}

// parseAcks reads the positional batches "first-last:type[,type...]".
func parseAcks(t *testing.T, c *datadriven.Case) []AckBatch {
	var out []AckBatch
	for _, w := range strings.Fields(c.Line)[1:] {
		rng, types, ok := strings.Cut(w, ":")
		if !ok || strings.Contains(rng, "=") {
			continue
		}
		b := AckBatch{}
		b.First, b.Last = parseRange(t, c, rng)
		for _, ty := range strings.Split(types, ",") {
			v, ok := ackTypes[ty]
			if !ok {
				t.Fatalf("%s: unknown ack type %q", c.Pos, ty)
			}
			b.Types = append(b.Types, v)
		}
		out = append(out, b)
	}
	return out
}
