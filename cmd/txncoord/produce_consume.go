package main

// `txncoord produce` and `txncoord consume`, in the manner of rpk topic
// produce and consume: records from standard input, records to standard
// output, through kgo against the cluster the admin API lists.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"

	"github.com/txncoord/txncoord/admin"
)

// stdinRecords is where `produce` reads its values (a test sets a file).
var stdinRecords = os.Stdin

// producedRecord and consumedRecord are the JSON lines of -o json.
type producedRecord struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

type consumedRecord struct {
	Topic       string            `json:"topic"`
	Partition   int32             `json:"partition"`
	Offset      int64             `json:"offset"`
	TimestampMs int64             `json:"timestamp_ms"`
	Key         *string           `json:"key"`
	Value       *string           `json:"value"`
	Headers     map[string]string `json:"headers,omitempty"`
}

// kafkaClient is a kgo client seeded with the leaders the admin API lists
// (or --brokers), over TLS and SASL as the Kafka flags say.
func kafkaClient(c *cli.Context, opts ...kgo.Opt) (*kgo.Client, error) {
	secOpts, err := kafkaSecurity(c)
	if err != nil {
		return nil, err
	}
	seeds := c.StringSlice("brokers")
	if len(seeds) == 0 {
		ctx, cancel := context.WithTimeout(c.Context, adminTimeout)
		defer cancel()
		leaders, err := admin.NewClientWithToken(c.String("admin"), c.String("token")).Leaders(ctx)
		if err != nil {
			return nil, err
		}
		for _, l := range leaders {
			seeds = append(seeds, l.Addr)
		}
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("no brokers: the admin API lists no leaders and --brokers is empty")
	}
	return kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, secOpts...), opts...)...)
}

func clientFlags(extra ...cli.Flag) []cli.Flag {
	return append(adminFlags(append([]cli.Flag{
		&cli.StringSliceFlag{Name: "brokers", EnvVars: env("brokers"), Usage: "seed brokers (default: the leaders the admin API lists)"},
	}, extra...)...), kafkaFlags()...)
}

func produceCommand() *cli.Command {
	return &cli.Command{
		Name:  "produce",
		Usage: "produce one record per line of standard input (as rpk topic produce)",
		Description: `Examples:
   echo hello | txncoord produce --topic orders --key k1 --header source=cli
   printf 'a\nb\n' | txncoord produce --topic orders --transactional-id cli-txn
   printf 'x\n' | txncoord produce --topic orders --transactional-id cli-txn --abort

Each line is one record's value. With --transactional-id the records are one transaction,
committed at the end of input (--abort: aborted). Prints where each record went.`,
		Flags: clientFlags(
			topicFlag(),
			&cli.StringFlag{Name: "key", EnvVars: env("key"), Usage: "the key of every record"},
			&cli.StringSliceFlag{Name: "header", EnvVars: env("header"), Usage: "a header name=value; repeatable"},
			&cli.IntFlag{Name: "partition", Value: -1, EnvVars: env("partition"), Usage: "the partition (default: the key's, or spread)"},
			&cli.StringFlag{Name: "transactional-id", EnvVars: env("transactional-id"), Usage: "produce in one transaction with this id"},
			&cli.BoolFlag{Name: "abort", EnvVars: env("abort"), Usage: "abort the transaction instead of committing it"},
		),
		Action: func(c *cli.Context) error {
			topic, out := c.String("topic"), outputFormat(c.String("output"))
			switch {
			case topic == "":
				return usagef("--topic is required")
			case out != "table" && out != "json":
				return usagef("-o %q: want table or json", out)
			case c.Bool("abort") && c.String("transactional-id") == "":
				return usagef("--abort needs --transactional-id")
			}
			var headers []kgo.RecordHeader
			for _, h := range c.StringSlice("header") {
				k, v, ok := strings.Cut(h, "=")
				if !ok || k == "" {
					return usagef("--header %q: want name=value", h)
				}
				headers = append(headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
			}
			opts := []kgo.Opt{kgo.DefaultProduceTopic(topic)}
			if c.Int("partition") >= 0 {
				opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			}
			txnID := c.String("transactional-id")
			if txnID != "" {
				opts = append(opts, kgo.TransactionalID(txnID))
			}
			cl, err := kafkaClient(c, opts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(c.Context, adminTimeout)
			defer cancel()
			if txnID != "" {
				if err := cl.BeginTransaction(); err != nil {
					return err
				}
			}
			lines := bufio.NewScanner(stdinRecords)
			lines.Buffer(make([]byte, 64<<10), 16<<20)
			for lines.Scan() {
				r := &kgo.Record{Value: []byte(lines.Text()), Headers: headers, Partition: int32(c.Int("partition"))}
				if c.IsSet("key") {
					r.Key = []byte(c.String("key"))
				}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					return fmt.Errorf("produce to %s: %s", topic, kafkaWords(err))
				}
				if out == "json" {
					if err := json.NewEncoder(c.App.Writer).Encode(producedRecord{r.Topic, r.Partition, r.Offset}); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(c.App.Writer, "Produced to partition %d at offset %d.\n", r.Partition, r.Offset)
				}
			}
			if err := lines.Err(); err != nil {
				return fmt.Errorf("reading standard input: %w", err)
			}
			if txnID == "" {
				return nil
			}
			end, verb := kgo.TryCommit, "Committed"
			if c.Bool("abort") {
				end, verb = kgo.TryAbort, "Aborted"
			}
			if err := cl.EndTransaction(ctx, end); err != nil {
				return fmt.Errorf("ending the transaction of %s: %s", txnID, kafkaWords(err))
			}
			if out != "json" {
				fmt.Fprintf(c.App.Writer, "%s the transaction of %s.\n", verb, txnID)
			}
			return nil
		},
	}
}

func consumeCommand() *cli.Command {
	return &cli.Command{
		Name:  "consume",
		Usage: "print a topic's records (as rpk topic consume)",
		Description: `Examples:
   txncoord consume --topic orders --num 10
   txncoord consume --topic orders --isolation read_uncommitted --offset end -o json
   txncoord consume --topic orders --group audit

Reads from the start of each partition (--offset start, end or a number), or, with --group, from
the group's committed offsets, committing as it goes. read_committed (the default) shows no record
of an aborted or open transaction. Stops after --num records, after --timeout, or on Ctrl-C.`,
		Flags: clientFlags(
			topicFlag(),
			&cli.IntFlag{Name: "partition", Value: -1, EnvVars: env("partition"), Usage: "only this partition"},
			&cli.StringFlag{Name: "group", EnvVars: env("group"), Usage: "consume in this group"},
			&cli.StringFlag{Name: "isolation", Value: "read_committed", EnvVars: env("isolation"), Usage: "read_committed or read_uncommitted"},
			&cli.StringFlag{Name: "offset", Value: "start", EnvVars: env("offset"), Usage: "start, end, or an offset (without --group)"},
			&cli.IntFlag{Name: "num", EnvVars: env("num"), Usage: "stop after this many records (0: no limit)"},
			&cli.DurationFlag{Name: "timeout", EnvVars: env("timeout"), Usage: "stop after this long (0: no limit)"},
		),
		Action: func(c *cli.Context) error {
			topic, out := c.String("topic"), outputFormat(c.String("output"))
			if topic == "" {
				return usagef("--topic is required")
			}
			if out != "table" && out != "json" {
				return usagef("-o %q: want table or json", out)
			}
			opts := []kgo.Opt{}
			switch c.String("isolation") {
			case "read_committed":
				opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			case "read_uncommitted":
				opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
			default:
				return usagef("--isolation %q: want read_committed or read_uncommitted", c.String("isolation"))
			}
			var start kgo.Offset
			switch o := c.String("offset"); o {
			case "start":
				start = kgo.NewOffset().AtStart()
			case "end":
				start = kgo.NewOffset().AtEnd()
			default:
				var at int64
				if _, err := fmt.Sscan(o, &at); err != nil || at < 0 {
					return usagef("--offset %q: want start, end or an offset >= 0", o)
				}
				start = kgo.NewOffset().At(at)
			}
			group := c.String("group")
			switch {
			case group != "" && c.Int("partition") >= 0:
				return usagef("--partition and --group exclude each other (a group's members are assigned partitions)")
			case group != "" && c.IsSet("offset"):
				return usagef("--offset and --group exclude each other (a group starts from its committed offsets)")
			case group != "":
				opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			case c.Int("partition") >= 0:
				opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {int32(c.Int("partition")): start}}))
			default:
				opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start))
			}
			cl, err := kafkaClient(c, opts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			if d := c.Duration("timeout"); d > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, d)
				defer cancel()
			}
			limit, n := c.Int("num"), 0
			enc := json.NewEncoder(c.App.Writer)
			for limit == 0 || n < limit {
				fs := cl.PollRecords(ctx, max(limit-n, 0))
				if ctx.Err() != nil {
					break
				}
				var fetchErr error
				fs.EachError(func(t string, p int32, err error) {
					if !errors.Is(err, context.Canceled) && fetchErr == nil {
						fetchErr = fmt.Errorf("fetch %s-%d: %s", t, p, kafkaWords(err))
					}
				})
				if fetchErr != nil {
					return fetchErr
				}
				for _, r := range fs.Records() {
					if limit > 0 && n >= limit {
						break
					}
					n++
					if out == "json" {
						if err := enc.Encode(toConsumed(r)); err != nil {
							return err
						}
						continue
					}
					fmt.Fprintf(c.App.Writer, "%s-%d@%d %s key=%s value=%s\n", r.Topic, r.Partition, r.Offset,
						r.Timestamp.UTC().Format(time.RFC3339Nano), orNull(r.Key), orNull(r.Value))
				}
			}
			if group != "" {
				commitCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := cl.CommitUncommittedOffsets(commitCtx); err != nil {
					return fmt.Errorf("committing the offsets of %s: %s", group, kafkaWords(err))
				}
			}
			return nil
		},
	}
}

func toConsumed(r *kgo.Record) consumedRecord {
	cr := consumedRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, TimestampMs: r.Timestamp.UnixMilli()}
	if r.Key != nil {
		k := string(r.Key)
		cr.Key = &k
	}
	if r.Value != nil {
		v := string(r.Value)
		cr.Value = &v
	}
	if len(r.Headers) > 0 {
		cr.Headers = map[string]string{}
		for _, h := range r.Headers {
			cr.Headers[h.Key] = string(h.Value)
		}
	}
	return cr
}

func orNull(b []byte) string {
	if b == nil {
		return "null"
	}
	return string(b)
}
