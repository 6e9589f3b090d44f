package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/markersender"
)

// clusterStatus is `txncoord status`: the cluster on one screen.
type clusterStatus struct {
	Coordinators []admin.CoordinatorStatus   `json:"coordinators"`
	Leaders      []markersender.LeaderStatus `json:"leaders"`
	Topics       int                         `json:"topics"`
	Partitions   int                         `json:"partitions"`
	Transactions map[string]int              `json:"transactions"` // by state
	Stuck        []markersender.PendingTxn   `json:"stuck_markers"`
	Pending      int                         `json:"pending_markers"`
	Groups       map[string]int              `json:"groups"` // by state
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:        "status",
		Usage:       "the cluster on one screen: nodes and versions, partitions, transactions by state, stuck markers, groups",
		Description: "Example:\n   txncoord status\n\nEach part is what the matching command shows in full (coordinators, leaders, topics, txn list,\nmarkers, groups list).",
		Flags:       adminFlags(),
		Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
			st, err := readStatus(ctx, cl)
			if err != nil {
				return err
			}
			if out == "json" {
				return printJSON(c.App.Writer, st)
			}
			return printStatus(c, st)
		}),
	}
}

func readStatus(ctx context.Context, cl *admin.Client) (clusterStatus, error) {
	st := clusterStatus{Transactions: map[string]int{}, Groups: map[string]int{}}
	var err error
	if st.Coordinators, err = cl.Coordinators(ctx); err != nil {
		return st, fmt.Errorf("coordinators: %w", err)
	}
	if st.Leaders, err = cl.Leaders(ctx); err != nil {
		return st, fmt.Errorf("leaders: %w", err)
	}
	topics, err := cl.Topics(ctx)
	if err != nil {
		return st, fmt.Errorf("topics: %w", err)
	}
	for _, t := range topics {
		st.Topics++
		st.Partitions += int(t.Partitions)
	}
	txns, err := cl.Transactions(ctx, admin.ListFilter{})
	if err != nil {
		return st, fmt.Errorf("transactions: %w", err)
	}
	for _, t := range txns {
		st.Transactions[t.State]++
	}
	markers, err := cl.Markers(ctx)
	if err != nil {
		return st, fmt.Errorf("markers: %w", err)
	}
	st.Stuck = []markersender.PendingTxn{}
	for _, m := range markers {
		st.Pending++
		if m.Stuck {
			st.Stuck = append(st.Stuck, m)
		}
	}
	groups, err := cl.Groups(ctx)
	if err != nil {
		return st, fmt.Errorf("groups: %w", err)
	}
	for _, g := range groups {
		st.Groups[g.State]++
	}
	return st, nil
}

func printStatus(c *cli.Context, st clusterStatus) error {
	t := tableFor(c, "NODE", "ROLE", "ADDR", "KAFKA-VERSION", "STATE", "WRITE-TXN-MARKERS", "QUEUED", "STUCK")
	for _, co := range st.Coordinators {
		state := "live"
		if !co.Live {
			state = "down"
		}
		t.Row(fmt.Sprint(co.NodeID), "coordinator", co.Addr, co.KafkaVersion, state, "-", "-", "-")
	}
	for _, l := range st.Leaders {
		state := "connected"
		if !l.Connected {
			state = "not connected"
		}
		t.Row(fmt.Sprint(l.NodeID), "leader", l.Addr, l.KafkaVersion, state,
			fmt.Sprintf("v%d (v%d-v%d)", l.WriteTxnMarkers.InUse, l.WriteTxnMarkers.Min, l.WriteTxnMarkers.Max),
			fmt.Sprint(l.QueuedMarkers), fmt.Sprint(l.StuckTransactions))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	w := c.App.Writer
	fmt.Fprintf(w, "\nTopics: %d, partitions: %d\n", st.Topics, st.Partitions)
	fmt.Fprintf(w, "Transactions: %s\n", byState(st.Transactions, admin.States))
	fmt.Fprintf(w, "Markers: %d transactions pending, %d stuck", st.Pending, len(st.Stuck))
	for _, s := range st.Stuck {
		fmt.Fprintf(w, "\n  %s (%s): %s", s.TransactionalID, s.Result, s.Reason)
	}
	fmt.Fprintf(w, "\nGroups: %s\n", byState(st.Groups, nil))
	return nil
}

// byState prints counts as "State=N, ...": the known states in their order
// (zeros included), then any other in name order; "none" when empty.
func byState(counts map[string]int, order []string) string {
	var parts []string
	seen := map[string]bool{}
	for _, s := range order {
		parts = append(parts, fmt.Sprintf("%s=%d", s, counts[s]))
		seen[s] = true
	}
	var rest []string
	for s := range counts {
		if !seen[s] {
			rest = append(rest, s)
		}
	}
	sort.Strings(rest)
	for _, s := range rest {
		parts = append(parts, fmt.Sprintf("%s=%d", s, counts[s]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
