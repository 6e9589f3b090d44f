package main

// The commands that change topics and groups through the Kafka protocol,
// as kafka-configs.sh, kafka-topics.sh --alter and kafka-consumer-groups.sh
// --reset-offsets do: kadm against the cluster the admin API lists, over TLS
// and SASL as the Kafka flags say.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/urfave/cli/v2"

	"github.com/txncoord/txncoord/admin"
)

func topicsAlterConfigCommand() *cli.Command {
	return &cli.Command{
		Name:  "alter-config",
		Usage: "set or delete a topic's configs (IncrementalAlterConfigs, as kafka-configs.sh --alter)",
		Description: `Example:
   txncoord topics alter-config --topic orders --config retention.ms=3600000 --delete-config max.message.bytes

Every change is validated by the controller as CreateTopics' configs are; one bad config refuses
them all.`,
		Flags: append(adminFlags(topicFlag(), configFlag(),
			&cli.StringSliceFlag{Name: "delete-config", EnvVars: env("delete-config"), Usage: "a config to remove (back to the default); repeatable"},
		), kafkaFlags()...),
		Action: topicAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat, topic string) error {
			sets, err := parseConfigs(c.Generic("config").(*configValues).pairs)
			if err != nil {
				return err
			}
			var changes []kadm.AlterConfig
			for name, value := range sets {
				changes = append(changes, kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: &value})
			}
			for _, name := range c.StringSlice("delete-config") {
				if _, both := sets[name]; both {
					return usagef("--config and --delete-config both name %s", name)
				}
				changes = append(changes, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: name})
			}
			if len(changes) == 0 {
				return usagef("give at least one --config name=value or --delete-config name")
			}
			r, err := connectLeaders(ctx, c, cl)
			if err != nil {
				return err
			}
			defer r.close()
			resps, err := r.adm.AlterTopicConfigs(ctx, changes, topic)
			var resp kadm.AlterConfigsResponse
			if err == nil {
				resp, err = resps.On(topic, nil)
			}
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				return kafkaUsage(err, resp.ErrMessage, "altering the configs of "+topic)
			}
			if out == "json" {
				return printJSON(c.App.Writer, map[string]string{"altered": topic})
			}
			_, err = fmt.Fprintf(c.App.Writer, "Completed updating config for topic %s.\n", topic)
			return err
		}),
	}
}

func topicsAddPartitionsCommand() *cli.Command {
	return &cli.Command{
		Name:  "add-partitions",
		Usage: "raise a topic's partition count (CreatePartitions, as kafka-topics.sh --alter --partitions)",
		Description: `Example:
   txncoord topics add-partitions --topic orders --partitions 12

--partitions is the new total; partitions are only ever added. Records with a key may map to
another partition afterwards, as in Kafka.`,
		Flags: append(adminFlags(topicFlag(),
			&cli.IntFlag{Name: "partitions", EnvVars: env("partitions"), Usage: "the topic's new partition count"},
		), kafkaFlags()...),
		Action: topicAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat, topic string) error {
			n := c.Int("partitions")
			if n <= 0 || n > 1<<31-1 {
				return usagef("--partitions %d: want the new partition count, a positive number", n)
			}
			r, err := connectLeaders(ctx, c, cl)
			if err != nil {
				return err
			}
			defer r.close()
			resps, err := r.adm.UpdatePartitions(ctx, n, topic)
			var resp kadm.CreatePartitionsResponse
			if err == nil {
				resp, err = resps.On(topic, nil)
			}
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				return kafkaUsage(err, resp.ErrMessage, "adding partitions to "+topic)
			}
			if out == "json" {
				return printJSON(c.App.Writer, map[string]any{"topic": topic, "partitions": n})
			}
			_, err = fmt.Fprintf(c.App.Writer, "Topic %s now has %d partitions.\n", topic, n)
			return err
		}),
	}
}

// kafkaUsage says what failed, with the server's message when it sent one;
// a refusal the request's own values caused (a bad config, partition count
// or topic) is a usage error, as topicError makes the admin API's 400 and
// 404; the rest stays a failure.
func kafkaUsage(err error, serverMessage, doing string) error {
	words := kafkaWords(err)
	if serverMessage != "" {
		words += ": " + serverMessage
	}
	msg := fmt.Errorf("%s: %s", doing, words)
	for _, refused := range []error{kerr.InvalidConfig, kerr.InvalidPartitions, kerr.UnknownTopicOrPartition, kerr.InvalidRequest, kerr.PolicyViolation} {
		if errors.Is(err, refused) {
			return usageError{msg}
		}
	}
	return msg
}

// resetOffset is one partition's new offset in `groups reset-offsets`.
type resetOffset struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	NewOffset int64  `json:"new_offset"`
}

func groupsResetOffsetsCommand() *cli.Command {
	return &cli.Command{
		Name:  "reset-offsets",
		Usage: "reset a group's committed offsets (as kafka-consumer-groups.sh --reset-offsets); a dry run unless --execute",
		Description: `Examples:
   txncoord groups reset-offsets --group orders-app --topic orders --to-earliest
   txncoord groups reset-offsets --group orders-app --topic orders:0,1 --to-offset 42 --execute
   txncoord groups reset-offsets --group orders-app --all-topics --to-datetime 2026-12-01T00:00:00Z --execute

Exactly one target: --to-earliest, --to-latest, --to-offset N (held within each partition's earliest
and latest offsets, as Kafka does) or --to-datetime (the first offset at or after that time, the
latest where there is none). The group must have no members (Empty, or no group yet), as Kafka
requires. Without --execute the new offsets are only shown.`,
		Flags: append(adminFlags(groupFlag(),
			&cli.StringFlag{Name: "topic", EnvVars: env("topic"), Usage: "the topic, or topic:partition,partition,..."},
			&cli.BoolFlag{Name: "all-topics", EnvVars: env("all-topics"), Usage: "every topic the group has committed offsets for"},
			&cli.BoolFlag{Name: "to-earliest", EnvVars: env("to-earliest"), Usage: "reset to each partition's earliest offset"},
			&cli.BoolFlag{Name: "to-latest", EnvVars: env("to-latest"), Usage: "reset to each partition's latest offset"},
			&cli.Int64Flag{Name: "to-offset", Value: -1, EnvVars: env("to-offset"), Usage: "reset to this offset"},
			&cli.TimestampFlag{Name: "to-datetime", Layout: time.RFC3339, EnvVars: env("to-datetime"), Usage: "reset to the first offset at or after this time (RFC 3339)"},
			&cli.BoolFlag{Name: "execute", EnvVars: env("execute"), Usage: "commit the new offsets (without it: a dry run)"},
		), kafkaFlags()...),
		Action: groupAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat, group string) error {
			targets := 0
			for _, f := range []string{"to-earliest", "to-latest", "to-offset", "to-datetime"} {
				if c.IsSet(f) {
					targets++
				}
			}
			if targets != 1 {
				return usagef("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
			}
			if c.IsSet("to-offset") && c.Int64("to-offset") < 0 {
				return usagef("--to-offset %d: want an offset >= 0", c.Int64("to-offset"))
			}
			if (c.String("topic") == "") == !c.Bool("all-topics") {
				return usagef("give exactly one of --topic or --all-topics")
			}
			topic, partitions, err := parseTopicPartitions(c.String("topic"))
			if err != nil {
				return err
			}
			g, err := cl.Group(ctx, group)
			var apiErr *admin.APIError
			switch {
			case errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound:
				// No group yet: its first offsets are set here.
			case err != nil:
				return err
			case g.MemberCount > 0:
				return fmt.Errorf("assignments can only be reset if the group '%s' is inactive, but the current state is %s", group, g.State)
			}
			r, err := connectLeaders(ctx, c, cl)
			if err != nil {
				return err
			}
			defer r.close()
			set := kadm.TopicsSet{}
			if topic != "" {
				sel, err := r.partitions(ctx, selection{brokerID: -1, topic: topic, partition: -1})
				if err != nil {
					return err
				}
				for _, p := range sel.Sorted()[0].Partitions {
					if len(partitions) == 0 || partitions[p] {
						set.Add(topic, p)
					}
				}
				for p := range partitions {
					if _, ok := set[topic][p]; !ok {
						return usagef("--topic %s: no partition %d", topic, p)
					}
				}
			} else {
				for _, o := range g.Offsets {
					if o.CurrentOffset >= 0 {
						set.Add(o.Topic, o.Partition)
					}
				}
			}
			plan, err := r.resetPlan(ctx, c, group, set)
			if err != nil {
				return err
			}
			if c.Bool("execute") {
				offsets := kadm.Offsets{}
				for _, p := range plan {
					offsets.Add(kadm.Offset{Topic: p.Topic, Partition: p.Partition, At: p.NewOffset, LeaderEpoch: -1})
				}
				if err := r.adm.CommitAllOffsets(ctx, group, offsets); err != nil {
					return fmt.Errorf("committing the new offsets of %s: %s", group, kafkaWords(err))
				}
			} else if out != "json" {
				fmt.Fprintln(c.App.ErrWriter, "Dry run: nothing committed; --execute commits these offsets.")
			}
			if out == "json" {
				return printJSON(c.App.Writer, plan)
			}
			t := tableFor(c, "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
			for _, p := range plan {
				t.Row(p.Group, p.Topic, fmt.Sprint(p.Partition), fmt.Sprint(p.NewOffset))
			}
			return t.Flush()
		}),
	}
}

// parseTopicPartitions reads --topic T or T:0,1,...
func parseTopicPartitions(s string) (string, map[int32]bool, error) {
	topic, list, ok := strings.Cut(s, ":")
	if !ok {
		return topic, nil, nil
	}
	partitions := map[int32]bool{}
	for _, f := range strings.Split(list, ",") {
		p, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || p < 0 {
			return "", nil, usagef("--topic %s: want topic or topic:partition,partition,...", s)
		}
		partitions[int32(p)] = true
	}
	return topic, partitions, nil
}

// resetPlan computes each partition's new offset for the target the flags
// name, from the partitions' earliest and latest offsets.
func (r *leaderReader) resetPlan(ctx context.Context, c *cli.Context, group string, set kadm.TopicsSet) ([]resetOffset, error) {
	topics := set.Topics()
	if len(topics) == 0 {
		return []resetOffset{}, nil
	}
	starts, err := r.adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("ListOffsets (earliest): %s", kafkaWords(err))
	}
	ends, err := r.adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("ListOffsets (latest): %s", kafkaWords(err))
	}
	var at kadm.ListedOffsets
	if c.IsSet("to-datetime") {
		if at, err = r.adm.ListOffsetsAfterMilli(ctx, c.Timestamp("to-datetime").UnixMilli(), topics...); err == nil {
			err = at.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("ListOffsets (by time): %s", kafkaWords(err))
		}
	}
	var plan []resetOffset
	for _, tp := range set.Sorted() {
		for _, p := range tp.Partitions {
			start, _ := starts.Lookup(tp.Topic, p)
			end, _ := ends.Lookup(tp.Topic, p)
			var offset int64
			switch {
			case c.Bool("to-earliest"):
				offset = start.Offset
			case c.Bool("to-latest"):
				offset = end.Offset
			case c.IsSet("to-offset"):
				offset = min(max(c.Int64("to-offset"), start.Offset), end.Offset)
			default:
				offset = end.Offset
				if o, ok := at.Lookup(tp.Topic, p); ok && o.Offset >= 0 {
					offset = o.Offset
				}
			}
			plan = append(plan, resetOffset{Group: group, Topic: tp.Topic, Partition: p, NewOffset: offset})
		}
	}
	return plan, nil
}
