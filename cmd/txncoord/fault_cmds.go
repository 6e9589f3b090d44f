package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/faults"
)

// faultCommand is `txncoord fault add|list|clear|replay`: the admin API's
// /v1/faults from the command line.
func faultCommand() *cli.Command {
	kinds := make([]string, len(faults.Kinds))
	for i, k := range faults.Kinds {
		kinds[i] = string(k)
	}
	return &cli.Command{
		Name:  "fault",
		Usage: "inject faults into a running cluster: delay, drop or fail requests, pause or kill a node, hold and replay markers",
		Description: "FOR TESTS: a fault makes the nodes misbehave on purpose, for every client, until it ends.\n" +
			"The same faults are at the admin API's /v1/faults, for a test suite in any language.",
		Subcommands: []*cli.Command{
			{
				Name:  "add",
				Usage: "inject a fault",
				Description: "Examples:\n" +
					"   txncoord fault add --kind error --node 1 --api-key 0 --error-code 6 --count 3   # 3 Produce answered NOT_LEADER_OR_FOLLOWER\n" +
					"   txncoord fault add --kind delay_response --node 0 --api-key 26 --delay 2s --for 1m\n" +
					"   txncoord fault add --kind drop_response --node 1 --api-key 0 --count 1            # the write happens, the answer is lost\n" +
					"   txncoord fault add --kind pause --node 2 --for 30s\n" +
					"   txncoord fault add --kind kill --node 1                                           # up: leader 1 down until fault clear\n" +
					"   txncoord fault add --kind kill --node 0                                           # node 0 down; this API answers the faults, 503 elsewhere\n" +
					"   txncoord fault add --admin http://127.0.0.1:9645 --kind kill --node 2             # a leader process (leader --admin-listen 127.0.0.1:9645)\n" +
					"   txncoord fault add --kind hold_markers --node 1                                   # then: fault list, fault clear --id N, fault replay --marker M",
				Flags: adminFlags(
					&cli.StringFlag{Name: "kind", EnvVars: env("kind"), Usage: "one of " + strings.Join(kinds, ", ")},
					&cli.IntFlag{Name: "node", Value: -1, EnvVars: env("node"), Usage: "node id (required): the node that misbehaves; for hold_markers, the leader whose markers are held"},
					&cli.IntFlag{Name: "api-key", Value: -1, EnvVars: env("api-key"), Usage: "only requests of this API key (0 Produce, 1 Fetch, 22 InitProducerId, 26 EndTxn, ...); default every API"},
					&cli.IntFlag{Name: "error-code", EnvVars: env("error-code"), Usage: "kind error: the Kafka error code to answer"},
					&cli.DurationFlag{Name: "delay", EnvVars: env("delay"), Usage: "kinds delay_request, delay_response: how long"},
					&cli.IntFlag{Name: "count", EnvVars: env("count"), Usage: "end after this many requests (default: no limit)"},
					&cli.DurationFlag{Name: "for", EnvVars: env("for"), Usage: "end after this long (default: until cleared)"},
				),
				Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
					sp, err := faultSpec(c)
					if err != nil {
						return err
					}
					f, err := cl.AddFault(ctx, sp)
					if err != nil {
						return err
					}
					if out == "json" {
						return printJSON(c.App.Writer, f)
					}
					fmt.Fprintf(c.App.Writer, "Added fault %d: %s.\n", f.ID, faultWhat(f))
					return nil
				}),
			},
			{
				Name:        "list",
				Usage:       "list the active faults and the held marker requests",
				Description: "Example:\n   txncoord fault list -o json",
				Flags:       adminFlags(),
				Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
					l, err := cl.Faults(ctx)
					if err != nil {
						return err
					}
					return printFaults(c, out, l)
				}),
			},
			{
				Name:        "clear",
				Usage:       "end one fault (--id) or every fault: a paused node resumes, a killed one restarts, held markers are sent",
				Description: "Examples:\n   txncoord fault clear --id 3\n   txncoord fault clear",
				Flags: adminFlags(
					&cli.Uint64Flag{Name: "id", EnvVars: env("id"), Usage: "the fault to end (default: every fault, and the held marker copies are forgotten)"},
				),
				Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
					l, err := cl.RemoveFault(ctx, c.Uint64("id"))
					if err != nil {
						return err
					}
					return printFaults(c, out, l)
				}),
			},
			{
				Name: "replay",
				Usage: "send a held WriteTxnMarkers request to its leader again (a late or duplicate marker) and show the leader's answer; " +
					"a 4.2 leader refuses a stale TV2 marker with INVALID_PRODUCER_EPOCH (47), a 4.1 leader applies it",
				Description: "Example:\n   txncoord fault replay --marker 4",
				Flags: adminFlags(
					&cli.Uint64Flag{Name: "marker", EnvVars: env("marker"), Usage: "the held marker's id (fault list)"},
				),
				Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
					if c.Uint64("marker") == 0 {
						return usagef("--marker is required (the held marker's id, from txncoord fault list)")
					}
					r, err := cl.ReplayMarker(ctx, c.Uint64("marker"))
					if err != nil {
						return err
					}
					if out == "json" {
						return printJSON(c.App.Writer, r)
					}
					t := tableFor(c, "Leader", "WtmVersion", "ProducerId", "Partition", "ErrorCode", "Error")
					for _, p := range r.Partitions {
						t.Row(fmt.Sprint(r.Leader), fmt.Sprint(r.Version), fmt.Sprint(p.ProducerID), fmt.Sprintf("%s-%d", p.Topic, p.Partition),
							fmt.Sprint(p.ErrorCode), p.Error)
					}
					return t.Flush()
				}),
			},
		},
	}
}

// faultSpec reads `fault add`'s flags; a bad value is a usage error naming
// the flag (the server checks the combination).
func faultSpec(c *cli.Context) (faults.Spec, error) {
	sp := faults.Spec{Kind: faults.Kind(c.String("kind")), Node: int32(c.Int("node")), Count: c.Int("count"),
		Delay: faults.Duration(c.Duration("delay")), For: faults.Duration(c.Duration("for"))}
	if sp.Kind == "" {
		return sp, usagef("--kind is required: one of %v", faults.Kinds)
	}
	if c.Int("node") < 0 {
		return sp, usagef("--node is required")
	}
	if k := c.Int("api-key"); k >= 0 {
		if k > 32767 || kmsg.NameForKey(int16(k)) == "Unknown" {
			return sp, usagef("--api-key %d: not a Kafka API key", k)
		}
		key := int16(k)
		sp.APIKey = &key
	}
	if e := c.Int("error-code"); e != 0 {
		if e < -32768 || e > 32767 {
			return sp, usagef("--error-code %d: not a Kafka error code", e)
		}
		sp.ErrorCode = int16(e)
	}
	if sp.Count < 0 {
		return sp, usagef("--count %d: want 0 (no limit) or more", sp.Count)
	}
	if c.Duration("delay") < 0 || c.Duration("for") < 0 {
		return sp, usagef("--delay and --for must not be negative")
	}
	return sp, nil
}

func faultWhat(f faults.Fault) string {
	api := "every API"
	if f.APIKey != nil {
		api = kmsg.NameForKey(*f.APIKey)
	}
	var what string
	switch f.Kind {
	case faults.Error:
		name := fmt.Sprint(f.ErrorCode)
		if e, ok := kerr.ErrorForCode(f.ErrorCode).(*kerr.Error); ok {
			name = fmt.Sprintf("%s (%d)", e.Message, f.ErrorCode)
		}
		what = fmt.Sprintf("node %d answers %s with %s", f.Node, api, name)
	case faults.DelayRequest, faults.DelayResponse:
		what = fmt.Sprintf("node %d: %s of %s by %s", f.Node, f.Kind, api, time.Duration(f.Delay))
	case faults.DropRequest, faults.DropResponse:
		what = fmt.Sprintf("node %d: %s of %s", f.Node, f.Kind, api)
	case faults.Pause:
		what = fmt.Sprintf("node %d paused", f.Node)
	case faults.Kill:
		what = fmt.Sprintf("node %d killed (restarted on its state when the fault ends)", f.Node)
	case faults.HoldMarkers:
		what = fmt.Sprintf("WriteTxnMarkers to node %d held", f.Node)
	}
	if f.Count > 0 {
		what += fmt.Sprintf(", for the next %d requests", f.Count)
	}
	if f.For > 0 {
		what += fmt.Sprintf(", for %s", time.Duration(f.For))
	}
	return what
}

func printFaults(c *cli.Context, out outputFormat, l faults.List) error {
	if out == "json" {
		return printJSON(c.App.Writer, l)
	}
	t := tableFor(c, "Id", "Fault", "Injected", "Remaining", "Expires")
	for _, f := range l.Faults {
		remaining, expires := "-", "-"
		if f.Count > 0 {
			remaining = fmt.Sprint(f.Remaining)
		}
		if f.ExpiresAt != nil {
			expires = f.ExpiresAt.Format(time.RFC3339)
		}
		t.Row(fmt.Sprint(f.ID), faultWhat(f), fmt.Sprint(f.Injected), remaining, expires)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if len(l.HeldMarkers) == 0 {
		return nil
	}
	fmt.Fprintln(c.App.Writer)
	t = tableFor(c, "Marker", "Fault", "Leader", "State", "ProducerId", "Epoch", "Result", "TV", "Partitions")
	for _, h := range l.HeldMarkers {
		state := "released"
		if h.Held {
			state = "HELD"
		}
		for _, m := range h.Markers {
			result := "ABORT"
			if m.Committed {
				result = "COMMIT"
			}
			var parts []string
			for _, tp := range m.Topics {
				for _, p := range tp.Partitions {
					parts = append(parts, fmt.Sprintf("%s-%d", tp.Topic, p))
				}
			}
			t.Row(fmt.Sprint(h.ID), fmt.Sprint(h.Fault), fmt.Sprint(h.Leader), state, fmt.Sprint(m.ProducerID),
				fmt.Sprint(m.ProducerEpoch), result, fmt.Sprint(m.TransactionVersion), strings.Join(parts, ","))
		}
	}
	return t.Flush()
}
