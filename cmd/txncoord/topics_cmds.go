package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/txncoord/txncoord/admin"
)

// topicsCommand is `txncoord topics list|create|describe|delete`, in the
// style of kafka-topics.sh (--list, --create, --describe, --delete),
// through the coordinator's admin API (the topic controller), and
// `alter-config|add-partitions` through the Kafka protocol (alter_cmds.go).
func topicsCommand() *cli.Command {
	return &cli.Command{
		Name:  "topics",
		Usage: "list, create, describe, delete and alter topics (as kafka-topics.sh and kafka-configs.sh)",
		Description: `Examples:
   txncoord topics list
   txncoord topics create --topic orders --partitions 6 --config max.message.bytes=65536 --config retention.ms=86400000
   txncoord topics describe --topic orders
   txncoord topics delete --topic orders`,
		Subcommands: []*cli.Command{
			{
				Name:        "list",
				Usage:       "list the topics, __consumer_offsets included",
				Description: "Example:\n   txncoord topics list -o json",
				Flags:       adminFlags(),
				Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
					ts, err := cl.Topics(ctx)
					if err != nil {
						return err
					}
					return printList(c, out, ts, []string{"TOPIC", "TOPIC-ID", "PARTITIONS", "REPLICATION-FACTOR", "INTERNAL"},
						func(x admin.Topic) []string {
							return []string{x.Name, x.ID, fmt.Sprint(x.Partitions), fmt.Sprint(x.ReplicationFactor), fmt.Sprint(x.Internal)}
						})
				}),
			},
			{
				Name:  "create",
				Usage: "create a topic",
				Description: `Example:
   txncoord topics create --topic orders --partitions 6 --replication-factor 1 --config cleanup.policy=delete

Partitions default to the cluster's default_partitions. txncoord keeps one replica per partition:
a replication factor of 1, -1 or up to the number of leaders is accepted and reported as 1.
--config is repeatable, one name=value each (Kafka's topic configs: max.message.bytes,
retention.ms, retention.bytes, cleanup.policy, message.timestamp.type, ...).`,
				Flags: adminFlags(
					topicFlag(),
					&cli.IntFlag{Name: "partitions", Value: -1, EnvVars: env("partitions"), Usage: "number of partitions (-1: the cluster's default_partitions)"},
					&cli.IntFlag{Name: "replication-factor", Value: -1, EnvVars: env("replication-factor"), Usage: "replication factor (-1: the default, 1)"},
					configFlag(),
					&cli.BoolFlag{Name: "if-not-exists", EnvVars: env("if-not-exists"), Usage: "succeed without change if the topic exists"},
				),
				Action: topicAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat, name string) error {
					req := admin.CreateTopic{Name: name}
					p, rf := c.Int("partitions"), c.Int("replication-factor")
					if p == 0 || p < -1 || p > 1<<31-1 {
						return usagef("--partitions %d: want a positive number, or -1 for the cluster's default", p)
					}
					if rf == 0 || rf < -1 || rf > 1<<15-1 {
						return usagef("--replication-factor %d: want a positive number, or -1 for the default", rf)
					}
					req.Partitions, req.ReplicationFactor = int32(p), int16(rf)
					configs, err := parseConfigs(c.Generic("config").(*configValues).pairs)
					if err != nil {
						return err
					}
					req.Configs = configs
					t, err := cl.CreateTopic(ctx, req)
					var apiErr *admin.APIError
					if errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict && c.Bool("if-not-exists") {
						if t, err = cl.Topic(ctx, name); err != nil {
							return topicError(err)
						}
						if out == "json" {
							return printJSON(c.App.Writer, t)
						}
						_, err := fmt.Fprintf(c.App.Writer, "Topic %s already exists.\n", name)
						return err
					}
					if err != nil {
						return topicError(err)
					}
					if out == "json" {
						return printJSON(c.App.Writer, t)
					}
					_, err = fmt.Fprintf(c.App.Writer, "Created topic %s.\n", name)
					return err
				}),
			},
			{
				Name:  "describe",
				Usage: "describe a topic (or every topic): id, partitions, configs, each partition's leader",
				Description: `Example:
   txncoord topics describe --topic orders

Prints, as kafka-topics.sh --describe does, one line per topic (Topic, TopicId, PartitionCount,
ReplicationFactor, Configs: the topic's own configs) and one per partition (Leader, Replicas, Isr).
Without --topic, every topic.`,
				Flags: adminFlags(&cli.StringFlag{Name: "topic", EnvVars: env("topic"), Usage: "the topic (default: every topic)"}),
				Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
					var names []string
					if name := c.String("topic"); name != "" {
						names = []string{name}
					} else {
						ts, err := cl.Topics(ctx)
						if err != nil {
							return err
						}
						for _, t := range ts {
							names = append(names, t.Name)
						}
					}
					var described []admin.Topic
					for _, name := range names {
						t, err := cl.Topic(ctx, name)
						if err != nil {
							return topicError(err)
						}
						described = append(described, t)
					}
					if out == "json" {
						if c.String("topic") != "" {
							return printJSON(c.App.Writer, described[0])
						}
						if described == nil {
							described = []admin.Topic{}
						}
						return printJSON(c.App.Writer, described)
					}
					for _, t := range described {
						if err := printTopic(c.App.Writer, t); err != nil {
							return err
						}
					}
					return nil
				}),
			},
			{
				Name:        "delete",
				Usage:       "DELETE a topic: its leaders drop its data",
				Description: "Example:\n   txncoord topics delete --topic orders\n\nA topic created again later gets a new topic id and starts empty.",
				Flags: adminFlags(topicFlag(),
					&cli.BoolFlag{Name: "if-exists", EnvVars: env("if-exists"), Usage: "succeed without change if the topic does not exist"}),
				Action: topicAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat, name string) error {
					err := cl.DeleteTopic(ctx, name)
					var apiErr *admin.APIError
					if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound && c.Bool("if-exists") {
						// Nothing was deleted: say so, rather than claim it.
						if out == "json" {
							return printJSON(c.App.Writer, map[string]string{"not_found": name})
						}
						_, err = fmt.Fprintf(c.App.Writer, "Topic %s does not exist: nothing deleted.\n", name)
						return err
					}
					if err != nil {
						return topicError(err)
					}
					if out == "json" {
						return printJSON(c.App.Writer, map[string]string{"deleted": name})
					}
					_, err = fmt.Fprintf(c.App.Writer, "Deleted topic %s.\n", name)
					return err
				}),
			},
			topicsAlterConfigCommand(),
			topicsAddPartitionsCommand(),
		},
	}
}

func topicFlag() cli.Flag {
	return &cli.StringFlag{Name: "topic", EnvVars: env("topic"), Usage: "the topic"}
}

// topicAction is adminAction for a command that needs --topic.
func topicAction(fn func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat, name string) error) cli.ActionFunc {
	return requiredFlagAction("topic", fn)
}

// topicError makes the admin API's 400 (a bad name, count or config) and
// 404 (no such topic) usage errors, as the README's exit codes say of a
// bad flag value and of a --topic the cluster does not have.
func topicError(err error) error {
	var apiErr *admin.APIError
	if errors.As(err, &apiErr) && (apiErr.Status == http.StatusBadRequest || apiErr.Status == http.StatusNotFound) {
		return usageError{err}
	}
	return err
}

// configValues is the repeatable --config name=value flag. Values are
// kept whole (a list value such as leader.replication.throttled.replicas
// holds commas): each --config is one pair.
type configValues struct{ pairs []string }

func (v *configValues) Set(s string) error { v.pairs = append(v.pairs, s); return nil }
func (v *configValues) String() string     { return strings.Join(v.pairs, " ") }

func configFlag() cli.Flag {
	return &cli.GenericFlag{Name: "config", Value: &configValues{}, EnvVars: env("config"),
		Usage: "a topic config name=value; repeat for more (TXNCOORD_CONFIG holds one)"}
}

// parseConfigs checks name=value pairs; a name given twice is refused.
func parseConfigs(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, usagef("--config %q: want name=value", p)
		}
		if _, dup := out[k]; dup {
			return nil, usagef("--config %s given twice", k)
		}
		out[k] = v
	}
	return out, nil
}

// printTopic prints a topic as kafka-topics.sh --describe does.
func printTopic(w io.Writer, t admin.Topic) error {
	names := make([]string, 0, len(t.Configs))
	for k := range t.Configs {
		names = append(names, k)
	}
	sort.Strings(names)
	configs := make([]string, 0, len(names))
	for _, k := range names {
		configs = append(configs, k+"="+t.Configs[k])
	}
	if _, err := fmt.Fprintf(w, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
		t.Name, t.ID, t.Partitions, t.ReplicationFactor, strings.Join(configs, ",")); err != nil {
		return err
	}
	ids := func(xs []int32) string {
		s := make([]string, len(xs))
		for i, x := range xs {
			s[i] = fmt.Sprint(x)
		}
		return strings.Join(s, ",")
	}
	for _, p := range t.PartitionInfo {
		leader := "none"
		if p.Leader >= 0 {
			leader = fmt.Sprint(p.Leader)
		}
		cleanable := ""
		if p.CleanableRatio != nil {
			cleanable = fmt.Sprintf("\tCleanableRatio: %.2f", *p.CleanableRatio)
		}
		if _, err := fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s%s\n",
			t.Name, p.Partition, leader, ids(p.Replicas), ids(p.Isr), cleanable); err != nil {
			return err
		}
	}
	return nil
}
