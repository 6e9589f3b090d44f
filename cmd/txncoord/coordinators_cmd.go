package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/txncoord/txncoord/admin"
)

// coordinatorsCommand is `txncoord coordinators`: GET /v1/coordinators as
// a table.
func coordinatorsCommand() *cli.Command {
	return &cli.Command{
		Name:  "coordinators",
		Usage: "per coordinator: liveness, the __transaction_state partitions it owns and their coordinator epochs",
		Description: `Example:
   txncoord coordinators -o json

Any coordinator's admin API answers for the whole cluster. Live: the coordinator holds its etcd lease
(a single coordinator without etcd is live while it answers). Self: the coordinator whose admin API
answered. Partitions: how many __transaction_state partitions it owns; Serving: how many of them it has
loaded and serves ("-" for the other coordinators, which only they know).

Epochs lists the owned partitions grouped by coordinator epoch, lowest epoch first, runs of
consecutive partitions as ranges: "0-5,9,12@3 7@5" is partitions 0 to 5, 9 and 12 at epoch 3 and
partition 7 at epoch 5 (taken over twice more). A long list is cut in the middle; --wide or -o json
shows all of it.`,
		Flags: adminFlags(),
		Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
			coordinators, err := cl.Coordinators(ctx)
			if err != nil {
				return err
			}
			return printList(c, out, coordinators, []string{"NodeId", "Addr", "KafkaVersion", "Live", "Self", "Partitions", "Serving", "Epochs"},
				func(s admin.CoordinatorStatus) []string {
					serving := "-"
					if s.Serving >= 0 {
						serving = fmt.Sprint(s.Serving)
					}
					return []string{fmt.Sprint(s.NodeID), s.Addr, s.KafkaVersion, fmt.Sprint(s.Live), fmt.Sprint(s.Self),
						fmt.Sprint(len(s.Partitions)), serving, epochsString(s.Partitions)}
				})
		}),
	}
}

// epochsString is the Epochs column: the partitions grouped by epoch
// (ascending), each group's partitions as ascending ranges, "0-5,9@3
// 7@5"; "-" for none. By epoch rather than by partition because most
// partitions share an epoch in a steady cluster, and the ones taken over
// stand out.
func epochsString(parts []admin.PartitionOwnership) string {
	if len(parts) == 0 {
		return "-"
	}
	sorted := slices.Clone(parts)
	slices.SortFunc(sorted, func(a, b admin.PartitionOwnership) int {
		return cmp.Or(cmp.Compare(a.Epoch, b.Epoch), cmp.Compare(a.Partition, b.Partition))
	})
	var groups []string
	for len(sorted) > 0 {
		epoch := sorted[0].Epoch
		n := 1
		for n < len(sorted) && sorted[n].Epoch == epoch {
			n++
		}
		groups = append(groups, partitionRanges(sorted[:n])+fmt.Sprintf("@%d", epoch))
		sorted = sorted[n:]
	}
	return strings.Join(groups, " ")
}

// partitionRanges writes ascending partitions as "0-5,9,12-13".
func partitionRanges(parts []admin.PartitionOwnership) string {
	var b strings.Builder
	for i := 0; i < len(parts); {
		j := i
		for j+1 < len(parts) && parts[j+1].Partition == parts[j].Partition+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j == i {
			fmt.Fprint(&b, parts[i].Partition)
		} else {
			fmt.Fprintf(&b, "%d-%d", parts[i].Partition, parts[j].Partition)
		}
		i = j + 1
	}
	return b.String()
}
