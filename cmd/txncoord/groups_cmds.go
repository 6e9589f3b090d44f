package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/txncoord/txncoord/admin"
)

// groupsCommand is `txncoord groups list|describe|delete`, in the style of
// kafka-consumer-groups.sh (--list, --describe, --delete), through the
// coordinator's admin API.
func groupsCommand() *cli.Command {
	return &cli.Command{
		Name:  "groups",
		Usage: "list, describe and delete consumer and share groups, and reset offsets (as kafka-consumer-groups.sh and kafka-share-groups.sh)",
		Description: `Examples:
   txncoord groups list
   txncoord groups describe --group orders-app
   txncoord groups delete --group orders-app`,
		Subcommands: []*cli.Command{
			{
				Name:        "list",
				Usage:       "list the consumer groups",
				Description: "Example:\n   txncoord groups list -o json",
				Flags:       adminFlags(),
				Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
					gs, err := cl.Groups(ctx)
					if err != nil {
						return err
					}
					return printList(c, out, gs, []string{"GROUP", "STATE", "PROTOCOL-TYPE", "PROTOCOL", "GENERATION", "MEMBERS", "COORDINATOR"},
						func(g admin.GroupSummary) []string {
							return []string{g.Group, g.State, g.ProtocolType, g.Protocol, fmt.Sprint(g.Generation), fmt.Sprint(g.MemberCount), fmt.Sprint(g.Coordinator)}
						})
				}),
			},
			{
				Name:  "describe",
				Usage: "describe a group: state, members and their assignment, committed and pending offsets, lag",
				Description: `Example:
   txncoord groups describe --group orders-app

Prints the group's state, then one row per partition as kafka-consumer-groups.sh --describe does
(CURRENT-OFFSET "-" when nothing is committed, LOG-END-OFFSET and LAG "-" when the leader could not
be asked), the members with their assignment, and the offsets committed in transactions that have
not ended yet (invisible to consumers until the COMMIT marker).`,
				Flags: adminFlags(groupFlag()),
				Action: groupAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat, id string) error {
					g, err := cl.Group(ctx, id)
					if err != nil {
						return err
					}
					if out == "json" {
						return printJSON(c.App.Writer, g)
					}
					return printGroup(c, g)
				}),
			},
			{
				Name:        "delete",
				Usage:       "DELETE an empty group and its committed offsets",
				Description: "Example:\n   txncoord groups delete --group orders-app\n\nA group with members is refused (NON_EMPTY_GROUP), as Kafka does.",
				Flags:       adminFlags(groupFlag()),
				Action: groupAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat, id string) error {
					if err := cl.DeleteGroup(ctx, id); err != nil {
						return err
					}
					if out == "json" {
						return printJSON(c.App.Writer, map[string]string{"deleted": id})
					}
					_, err := fmt.Fprintf(c.App.Writer, "deleted group %s\n", id)
					return err
				}),
			},
			groupsResetOffsetsCommand(),
		},
	}
}

func groupFlag() cli.Flag {
	return &cli.StringFlag{Name: "group", EnvVars: env("group"), Usage: "the group id"}
}

// groupAction is adminAction for a command that needs --group.
func groupAction(fn func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat, id string) error) cli.ActionFunc {
	return requiredFlagAction("group", fn)
}

// printMembers prints a group's members and their assignment.
func printMembers(c *cli.Context, g admin.GroupDetail) error {
	t := tableFor(c, "GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")
	for _, m := range g.Members {
		parts := make([]string, 0, len(m.Assignment))
		for _, tp := range m.Assignment {
			parts = append(parts, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
		}
		instance := m.InstanceID
		if instance == "" {
			instance = "-"
		}
		assigned := strings.Join(parts, ",")
		if assigned == "" {
			assigned = "-"
		}
		t.Row(g.Group, m.MemberID, instance, m.Host, m.ClientID, fmt.Sprint(len(m.Assignment)), assigned)
	}
	return t.Flush()
}

// printGroup prints a group as tables: its state, its partitions with
// offsets and lag, its members, its pending transactional offsets.
func printGroup(c *cli.Context, g admin.GroupDetail) error {
	w := c.App.Writer
	t := tableFor(c, "GROUP", "COORDINATOR", "STATE", "PROTOCOL-TYPE", "PROTOCOL", "GENERATION", "MEMBERS", "OFFSETS-PARTITION")
	t.Row(g.Group, fmt.Sprint(g.Coordinator), g.State, g.ProtocolType, g.Protocol, fmt.Sprint(g.Generation), fmt.Sprint(g.MemberCount), fmt.Sprint(g.OffsetsPartition))
	if err := t.Flush(); err != nil {
		return err
	}
	dash := func(v int64) string {
		if v < 0 {
			return "-"
		}
		return fmt.Sprint(v)
	}
	orDash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	fmt.Fprintln(w)
	if g.Type == "share" {
		// As kafka-share-groups.sh --describe: the share-partition start
		// offset, and the records in flight.
		t = tableFor(c, "GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG", "ACQUIRED", "AVAILABLE")
		for _, p := range g.SharePartitions {
			t.Row(g.Group, p.Topic, fmt.Sprint(p.Partition), fmt.Sprint(p.StartOffset), dash(p.EndOffset), dash(p.Lag), fmt.Sprint(p.Acquired), fmt.Sprint(p.Available))
		}
		if err := t.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		return printMembers(c, g)
	}
	t = tableFor(c, "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")
	for _, o := range g.Offsets {
		t.Row(g.Group, o.Topic, fmt.Sprint(o.Partition), dash(o.CurrentOffset), dash(o.LogEndOffset), dash(o.Lag), orDash(o.MemberID), orDash(o.Host), orDash(o.ClientID))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := printMembers(c, g); err != nil {
		return err
	}
	if len(g.Pending) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t = tableFor(c, "GROUP", "TOPIC", "PARTITION", "PENDING-OFFSET", "PRODUCER-ID", "PRODUCER-EPOCH")
	for _, p := range g.Pending {
		t.Row(g.Group, p.Topic, fmt.Sprint(p.Partition), fmt.Sprint(p.Offset), fmt.Sprint(p.ProducerID), fmt.Sprint(p.ProducerEpoch))
	}
	return t.Flush()
}
