package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/urfave/cli/v2"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/markersender"
	"github.com/txncoord/txncoord/security"
)

func adminFlags(extra ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "admin", Value: "http://127.0.0.1:9644", EnvVars: env("admin"), Usage: "admin API base URL"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", EnvVars: env("output"), Usage: "table or json"},
		&cli.StringFlag{Name: "token", EnvVars: env("admin-token"), Usage: "admin API bearer token (up --secure writes it to DATA_DIR/security/admin.token)"},
		&cli.BoolFlag{Name: "wide", EnvVars: env("wide"), Usage: fmt.Sprintf("table output: whole values (cells are cut at %d characters otherwise)", maxCellWidth)},
	}, extra...)
}

// adminTimeout bounds one admin command, every request it makes included.
const adminTimeout = 60 * time.Second

// adminAction checks the common flags and hands the command an admin client.
func adminAction(fn func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		if u, err := url.Parse(c.String("admin")); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("--admin %q: want the admin API's URL, such as http://127.0.0.1:9644", c.String("admin"))
		}
		out := outputFormat(c.String("output"))
		if out != "table" && out != "json" {
			return usagef("-o %q: want table or json", out)
		}
		ctx, cancel := context.WithTimeout(c.Context, adminTimeout)
		defer cancel()
		err := fn(c, ctx, admin.NewClientWithToken(c.String("admin"), c.String("token")), out)
		var apiErr *admin.APIError
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized {
			return fmt.Errorf("%w; give --token or TXNCOORD_ADMIN_TOKEN (up --secure writes DATA_DIR/security/admin.token)", err)
		}
		return err
	}
}

// requiredFlagAction is adminAction for a command that needs the string
// flag name (--group, --topic): fn gets its value.
func requiredFlagAction(name string, fn func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat, value string) error) cli.ActionFunc {
	return adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
		value := c.String(name)
		if value == "" {
			return usagef("--%s is required", name)
		}
		return fn(c, ctx, cl, out, value)
	})
}

// printList prints a list command's items: as JSON, or as a table with
// header and a row of each item.
func printList[T any](c *cli.Context, out outputFormat, items []T, header []string, row func(T) []string) error {
	if out == "json" {
		return printJSON(c.App.Writer, items)
	}
	t := tableFor(c, header...)
	for _, x := range items {
		t.Row(row(x)...)
	}
	return t.Flush()
}

type outputFormat string

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// tableFor starts a table on the command's output, --wide as given.
func tableFor(c *cli.Context, header ...string) *table {
	return newTable(c.App.Writer, c.Bool("wide"), header...)
}

func partitionsString(t admin.Txn) string {
	parts := make([]string, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		parts = append(parts, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
	}
	return strings.Join(parts, ",")
}

func txnCommand() *cli.Command {
	return &cli.Command{
		Name:  "txn",
		Usage: "list, describe, abort and find hanging transactions (as kafka-transactions.sh)",
		Description: `Examples:
   txncoord txn list --state Ongoing
   txncoord txn describe --transactional-id orders-app-1 -o json
   txncoord txn find-hanging --topic orders`,
		Subcommands: []*cli.Command{
			{
				Name:        "list",
				Usage:       "list transactions known to the coordinator",
				Description: "Example:\n   txncoord txn list --state Ongoing --duration-filter 1m -o json",
				Flags: adminFlags(
					&cli.StringFlag{Name: "state", EnvVars: env("state"), Usage: "only transactions in this state (Ongoing, PrepareCommit, ...)"},
					&cli.DurationFlag{Name: "duration-filter", EnvVars: env("duration-filter"), Usage: "only transactions open at least this long"},
				),
				Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
					state := c.String("state")
					if state != "" && !slices.Contains(admin.States, state) {
						return usagef("--state %q: want one of %s", state, strings.Join(admin.States, ", "))
					}
					txns, err := cl.Transactions(ctx, admin.ListFilter{State: state, MinDuration: c.Duration("duration-filter")})
					if err != nil {
						return err
					}
					if out == "json" {
						return printJSON(c.App.Writer, txns)
					}
					t := tableFor(c, "TransactionalId", "Coordinator", "ProducerId", "ProducerEpoch", "State", "TV")
					for _, x := range txns {
						t.Row(x.TransactionalID, fmt.Sprint(x.CoordinatorID), fmt.Sprint(x.ProducerID), fmt.Sprint(x.ProducerEpoch), x.State, fmt.Sprint(x.TransactionVersion))
					}
					return t.Flush()
				}),
			},
			{
				Name:        "describe",
				Usage:       "describe one transaction",
				Description: "Example:\n   txncoord txn describe --transactional-id orders-app-1",
				Flags:       adminFlags(txnIDFlag()),
				Action: txnIDAction(func(_ *cli.Context, ctx context.Context, cl *admin.Client, id string) (admin.Txn, error) {
					return cl.Transaction(ctx, id)
				}, func(c *cli.Context, t admin.Txn) error {
					tbl := tableFor(c, "TransactionalId", "ProducerId", "ProducerEpoch", "State", "TimeoutMs", "TV", "StartTime", "Duration", "Partitions", "StuckReason")
					tbl.Row(t.TransactionalID, fmt.Sprint(t.ProducerID), fmt.Sprint(t.ProducerEpoch), t.State, fmt.Sprint(t.TimeoutMs),
						fmt.Sprint(t.TransactionVersion), msTime(t.StartTimeMs), (time.Duration(t.DurationMs) * time.Millisecond).String(), partitionsString(t), t.StuckReason)
					if err := tbl.Flush(); err != nil || len(t.PendingOffsets) == 0 {
						return err
					}
					// The group offsets committed in it, visible once it commits.
					fmt.Fprintln(c.App.Writer)
					tbl = tableFor(c, "GROUP", "TOPIC", "PARTITION", "PENDING-OFFSET")
					for _, p := range t.PendingOffsets {
						tbl.Row(p.Group, p.Topic, fmt.Sprint(p.Partition), fmt.Sprint(p.Offset))
					}
					return tbl.Flush()
				}),
			},
			{
				Name:  "abort",
				Usage: "ABORT an open transaction: its records become invisible to read_committed consumers",
				Description: `Examples:
   txncoord txn abort --transactional-id orders-app-1 --yes
   txncoord txn abort --topic orders --partition 1 --start-offset 42 --yes

By transactional id, through the coordinator: an Ongoing transaction is aborted (PrepareAbort,
then its markers). One in PrepareAbort whose markers are stuck (txncoord markers) is completed
as aborted: the leaders that did not get the marker keep it open (txn find-hanging shows them).
A transaction in PrepareCommit is never aborted: --force completes it as COMMITTED for the
partitions that acknowledged and GIVES UP on the others, whose records stay uncommitted; it
also ends a PrepareAbort whose markers are not (yet) stuck. The answer lists the partitions
given up.

By partition, straight to its leader (a hanging transaction the coordinator no longer knows,
as kafka-transactions.sh abort): --topic, --partition and either --start-offset (the open
transaction's first offset there, as txn find-hanging and txncoord producers show it) or
--producer-id, --producer-epoch and --coordinator-epoch. An ABORT marker is written to that
one partition only; the coordinator is not asked.

Asks before it acts unless --yes is given; without a terminal, --yes is required.`,
				Flags: append(adminFlags(
					txnIDFlag(),
					&cli.BoolFlag{Name: "yes", EnvVars: env("yes"), Usage: "do not ask for confirmation"},
					&cli.BoolFlag{Name: "force", EnvVars: env("force"), Usage: "end a transaction in PrepareCommit or PrepareAbort whose markers are not all delivered: " +
						"complete it as it was decided (PrepareCommit: COMMITTED) for the partitions that acknowledged, and GIVE UP on the others (their leaders keep it open)"},
					&cli.StringFlag{Name: "topic", EnvVars: env("topic"), Usage: "abort at this topic's partition instead of by transactional id"},
					&cli.IntFlag{Name: "partition", Value: -1, EnvVars: env("partition"), Usage: "the partition (with --topic)"},
					&cli.Int64Flag{Name: "start-offset", Value: -1, EnvVars: env("start-offset"), Usage: "the first offset of the open transaction to abort (with --topic)"},
					&cli.Int64Flag{Name: "producer-id", Value: -1, EnvVars: env("producer-id"), Usage: "the producer id (with --topic, instead of --start-offset)"},
					&cli.IntFlag{Name: "producer-epoch", Value: -1, EnvVars: env("producer-epoch"), Usage: "the producer epoch (with --producer-id)"},
					&cli.IntFlag{Name: "coordinator-epoch", Value: -1, EnvVars: env("coordinator-epoch"), Usage: "the coordinator epoch (with --producer-id; -1 as DescribeProducers shows it becomes 0)"},
				), kafkaFlags()...),
				Action: func(c *cli.Context) error {
					if c.IsSet("topic") {
						return partitionAbortAction(c)
					}
					return txnAbortAction(c)
				},
			},
			{
				Name:        "retry-markers",
				Usage:       "resend the markers of a transaction reported stuck (see txncoord markers)",
				Description: "Example:\n   txncoord txn retry-markers --transactional-id orders-app-1",
				Flags:       adminFlags(txnIDFlag()),
				Action: txnIDAction(func(_ *cli.Context, ctx context.Context, cl *admin.Client, id string) (admin.Txn, error) {
					return cl.RetryMarkers(ctx, id)
				}, func(c *cli.Context, t admin.Txn) error {
					_, err := fmt.Fprintf(c.App.Writer, "resending the markers of %s (state %s)\n", t.TransactionalID, t.State)
					return err
				}),
			},
			findHangingCommand(),
		},
	}
}

// txnAbortAction aborts by transactional id, through the coordinator.
var txnAbortAction = txnIDAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, id string) (admin.Txn, error) {
	if !c.Bool("yes") {
		if err := confirmAbort(c, ctx, cl, id); err != nil {
			return admin.Txn{}, err
		}
	}
	return cl.AbortForce(ctx, id, c.Bool("force"))
}, func(c *cli.Context, t admin.Txn) error {
	verb := "aborting"
	if strings.HasPrefix(t.State, "Complete") {
		verb = "ended"
	}
	_, err := fmt.Fprintf(c.App.Writer, "%s %s: state %s, producer id %d, epoch %d\n", verb, t.TransactionalID, t.State, t.ProducerID, t.ProducerEpoch)
	if err == nil && len(t.GaveUp) > 0 {
		_, err = fmt.Fprintf(c.App.Writer, "gave up the markers of %s: their leaders keep the transaction open (txncoord txn find-hanging)\n",
			partitionsString(admin.Txn{Partitions: t.GaveUp}))
	}
	return err
})

// confirmInput is where `txn abort` reads its answer (a test sets a file
// that is not a terminal).
var confirmInput = os.Stdin

// confirmAbort shows what `txn abort` will do and asks; without a terminal
// to ask on it refuses (a usage error: --yes is missing). The transaction
// is read first, so an unknown id or an unreachable API is reported as such.
func confirmAbort(c *cli.Context, ctx context.Context, cl *admin.Client, id string) error {
	t, err := cl.Transaction(ctx, id)
	if err != nil {
		return err
	}
	var consequence string
	switch {
	case t.State == "PrepareCommit" && c.Bool("force"):
		consequence = fmt.Sprintf("This will COMPLETE transaction %q (producer id %d, epoch %d, state %s, %d partitions) as COMMITTED without waiting for all its markers: the partitions that have not acknowledged are GIVEN UP and their records stay uncommitted.",
			id, t.ProducerID, t.ProducerEpoch, t.State, len(t.Partitions))
	case t.State == "PrepareAbort":
		consequence = fmt.Sprintf("This will COMPLETE transaction %q (producer id %d, epoch %d, state %s, %d partitions) as aborted without waiting for all its markers: the leaders that have not acknowledged keep it open.",
			id, t.ProducerID, t.ProducerEpoch, t.State, len(t.Partitions))
	default:
		consequence = fmt.Sprintf("This will ABORT transaction %q (producer id %d, epoch %d, state %s, %d partitions): its records will never be visible to read_committed consumers, and the producer will be fenced.",
			id, t.ProducerID, t.ProducerEpoch, t.State, len(t.Partitions))
	}
	return confirmAbortOf(c, id, consequence)
}

// confirmAbortOf shows what an abort of what will do and asks on the
// terminal; without one it refuses (a usage error: --yes is missing).
func confirmAbortOf(c *cli.Context, what, consequence string) error {
	if !isatty.IsTerminal(confirmInput.Fd()) {
		return usagef("refusing to abort %s without --yes: standard input is not a terminal to confirm on", what)
	}
	fmt.Fprintln(c.App.ErrWriter, consequence)
	fmt.Fprint(c.App.ErrWriter, "Abort it? [y/N] ")
	line, _ := bufio.NewReader(confirmInput).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return fmt.Errorf("not aborted")
	}
	return nil
}

func txnIDFlag() cli.Flag {
	return &cli.StringFlag{Name: "transactional-id", EnvVars: env("transactional-id"), Usage: "the transactional id"}
}

// txnIDAction runs one admin call on --transactional-id and prints the
// transaction it returns as JSON or with text.
func txnIDAction(call func(c *cli.Context, ctx context.Context, cl *admin.Client, id string) (admin.Txn, error), text func(*cli.Context, admin.Txn) error) cli.ActionFunc {
	return adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
		id := c.String("transactional-id")
		switch {
		case id == "":
			return usagef("--transactional-id is required")
		case len(id) > cluster.MaxTransactionalIDBytes:
			return usagef("--transactional-id is %d bytes long; Kafka allows at most %d", len(id), cluster.MaxTransactionalIDBytes)
		}
		t, err := call(c, ctx, cl, id)
		if err != nil {
			return err
		}
		if out == "json" {
			return printJSON(c.App.Writer, t)
		}
		return text(c, t)
	})
}

func msTime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

func kafkaFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "tls-ca", EnvVars: env("tls-ca"), Usage: "CA file for TLS to the leaders (up --secure: DATA_DIR/security/ca.crt)"},
		&cli.StringFlag{Name: "sasl-user", EnvVars: env("sasl-user"), Usage: "SASL user for the leaders"},
		&cli.StringFlag{Name: "sasl-password-file", EnvVars: env("sasl-password-file"), Usage: "file holding the SASL password"},
		&cli.StringFlag{Name: "sasl-mechanism", Value: "SCRAM-SHA-512", EnvVars: env("sasl-mechanism"), Usage: "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"},
	}
}

// kafkaSecurity turns the --tls-ca and --sasl-* flags into kgo options.
func kafkaSecurity(c *cli.Context) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if ca := c.String("tls-ca"); ca != "" {
		tlsCfg, err := security.ClientTLS(ca, "", "")
		if err != nil {
			return nil, usagef("--tls-ca: %v", err)
		}
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	user := c.String("sasl-user")
	if user == "" {
		return opts, nil
	}
	raw, err := os.ReadFile(c.String("sasl-password-file"))
	if err != nil {
		return nil, usagef("--sasl-password-file: %v", err)
	}
	pass := strings.TrimSpace(string(raw))
	switch c.String("sasl-mechanism") {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	default:
		return nil, usagef("--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.String("sasl-mechanism"))
	}
	return opts, nil
}

// leaderReader reads the leaders directly, for the commands that ask them
// rather than the admin API (producers, find-hanging): a franz-go admin
// client seeded with the leaders the admin API lists, over TLS and SASL as
// the flags say.
type leaderReader struct {
	adm     *kadm.Client
	leaders []markersender.LeaderStatus
	close   func()
}

func connectLeaders(ctx context.Context, c *cli.Context, cl *admin.Client) (*leaderReader, error) {
	secOpts, err := kafkaSecurity(c)
	if err != nil {
		return nil, err
	}
	leaders, err := cl.Leaders(ctx)
	if err != nil {
		return nil, err
	}
	seeds := make([]string, 0, len(leaders))
	for _, l := range leaders {
		seeds = append(seeds, l.Addr)
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("the admin API lists no leaders")
	}
	kc, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, secOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("connecting to the leaders: %w", err)
	}
	return &leaderReader{adm: kadm.NewClient(kc), leaders: leaders, close: kc.Close}, nil
}

// selection is what --broker-id, --topic and --partition name; -1 and ""
// mean any.
type selection struct {
	brokerID  int32
	topic     string
	partition int32
}

// partitions resolves sel against the leaders' metadata. A leader, topic or
// partition the cluster does not have is a usage error that names it.
// Topics are listed, never requested by name, so nothing is auto-created.
func (r *leaderReader) partitions(ctx context.Context, sel selection) (kadm.TopicsSet, error) {
	if sel.brokerID >= 0 {
		ids := make([]string, 0, len(r.leaders))
		known := false
		for _, l := range r.leaders {
			ids = append(ids, fmt.Sprint(l.NodeID))
			known = known || l.NodeID == sel.brokerID
		}
		if !known {
			return nil, usagef("--broker-id %d: no such leader (leaders: %s)", sel.brokerID, strings.Join(ids, ", "))
		}
	}
	md, err := r.adm.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the leaders' metadata: %s", kafkaWords(err))
	}
	if sel.topic != "" {
		td, ok := md.Topics[sel.topic]
		if !ok || td.Err != nil {
			return nil, usagef("--topic %s: no such topic (txncoord up --topics creates topics)", sel.topic)
		}
		if _, ok := td.Partitions[sel.partition]; sel.partition >= 0 && !ok {
			return nil, usagef("--partition %d: %s has partitions 0 to %d", sel.partition, sel.topic, len(td.Partitions)-1)
		}
	}
	set := kadm.TopicsSet{}
	for _, td := range md.Topics.Sorted() {
		if sel.topic != "" && td.Topic != sel.topic {
			continue
		}
		for _, pd := range td.Partitions.Sorted() {
			if sel.partition >= 0 && pd.Partition != sel.partition || sel.brokerID >= 0 && pd.Leader != sel.brokerID {
				continue
			}
			set.Add(td.Topic, pd.Partition)
		}
	}
	return set, nil
}

// describeProducers asks the leaders of set for their producers
// (DescribeProducers); a partition a leader could not describe is an error,
// so nothing is left out silently.
func (r *leaderReader) describeProducers(ctx context.Context, set kadm.TopicsSet) (kadm.DescribedProducersTopics, error) {
	described, err := r.adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, fmt.Errorf("DescribeProducers: %s", kafkaWords(err))
	}
	for _, p := range described.SortedPartitions() {
		if p.Err != nil {
			return nil, fmt.Errorf("DescribeProducers: %s-%d: leader %d answered %s", p.Topic, p.Partition, p.Leader, kafkaWords(p.Err))
		}
	}
	return described, nil
}

// kafkaWords says in one line what a Kafka request's error means: the
// error code by name and number, the leader that answered it, or the
// command's time running out.
func kafkaWords(err error) string {
	var shards *kadm.ShardErrors
	if errors.As(err, &shards) && len(shards.Errs) > 0 {
		first := shards.Errs[0]
		who := "the leaders"
		if b := first.Broker; b.NodeID >= 0 {
			who = fmt.Sprintf("leader %d (%s)", b.NodeID, net.JoinHostPort(b.Host, fmt.Sprint(b.Port)))
		}
		msg := fmt.Sprintf("%s answered %s", who, kafkaWords(first.Err))
		if more := len(shards.Errs) - 1; more > 0 {
			msg += fmt.Sprintf(" (and %d more failed)", more)
		}
		return msg
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return fmt.Sprintf("%s (Kafka error %d)", ke.Message, ke.Code)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", adminTimeout)
	}
	return err.Error()
}

func producersCommand() *cli.Command {
	return &cli.Command{
		Name:        "producers",
		Usage:       "describe the producers a partition's leader has state for (DescribeProducers)",
		Description: "Example:\n   txncoord producers --topic orders --partition 0",
		Flags: append(adminFlags(
			&cli.StringFlag{Name: "topic", EnvVars: env("topic"), Usage: "topic (required)"},
			&cli.IntFlag{Name: "partition", Value: -1, EnvVars: env("partition"), Usage: "partition (required)"},
		), kafkaFlags()...),
		Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
			sel := selection{brokerID: -1, topic: c.String("topic"), partition: int32(c.Int("partition"))}
			if sel.topic == "" || sel.partition < 0 {
				return usagef("--topic and --partition are required")
			}
			r, err := connectLeaders(ctx, c, cl)
			if err != nil {
				return err
			}
			defer r.close()
			set, err := r.partitions(ctx, sel)
			if err != nil {
				return err
			}
			described, err := r.describeProducers(ctx, set)
			if err != nil {
				return err
			}
			p, ok := described[sel.topic].Partitions[sel.partition]
			if !ok {
				return fmt.Errorf("DescribeProducers: no answer for %s-%d", sel.topic, sel.partition)
			}
			producers := p.ActiveProducers.Sorted()
			if out == "json" {
				rows := make([]producerJSON, 0, len(producers))
				for _, d := range producers {
					rows = append(rows, producerJSON{Leader: d.Leader, Topic: d.Topic, Partition: d.Partition, ProducerID: d.ProducerID,
						ProducerEpoch: d.ProducerEpoch, LastSequence: d.LastSequence, LastTimestampMs: d.LastTimestamp,
						CoordinatorEpoch: d.CoordinatorEpoch, CurrentTxnStartOffset: d.CurrentTxnStartOffset})
				}
				return printJSON(c.App.Writer, rows)
			}
			t := tableFor(c, "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp", "CurrentTransactionStartOffset")
			for _, d := range producers {
				t.Row(fmt.Sprint(d.ProducerID), fmt.Sprint(d.ProducerEpoch), fmt.Sprint(d.CoordinatorEpoch),
					fmt.Sprint(d.LastSequence), msTime(d.LastTimestamp), fmt.Sprint(d.CurrentTxnStartOffset))
			}
			return t.Flush()
		}),
	}
}

// producerJSON is one producer in `producers -o json`: snake_case keys, as
// every other command's JSON (kadm's DescribedProducer has no JSON tags).
type producerJSON struct {
	Leader                int32  `json:"leader"`
	Topic                 string `json:"topic"`
	Partition             int32  `json:"partition"`
	ProducerID            int64  `json:"producer_id"`
	ProducerEpoch         int16  `json:"producer_epoch"`
	LastSequence          int32  `json:"last_sequence"`
	LastTimestampMs       int64  `json:"last_timestamp_ms"`
	CoordinatorEpoch      int32  `json:"coordinator_epoch"`
	CurrentTxnStartOffset int64  `json:"current_txn_start_offset"`
}

// hangingTxn is an open transaction at a leader that the coordinator does
// not know as open on that partition.
type hangingTxn struct {
	Topic                 string `json:"topic"`
	Partition             int32  `json:"partition"`
	Leader                int32  `json:"leader"`
	ProducerID            int64  `json:"producer_id"`
	ProducerEpoch         int16  `json:"producer_epoch"`
	CoordinatorEpoch      int32  `json:"coordinator_epoch"`
	CurrentTxnStartOffset int64  `json:"current_txn_start_offset"`
	LastTimestampMs       int64  `json:"last_timestamp_ms"`
	Reason                string `json:"reason"`
}

func findHangingCommand() *cli.Command {
	return &cli.Command{
		Name:  "find-hanging",
		Usage: "find transactions open at leaders that the coordinator does not know as open (as kafka-transactions.sh find-hanging)",
		Description: `Example:
   txncoord txn find-hanging --topic orders --max-transaction-timeout 15m
   txncoord txn find-hanging --broker-id 2`,
		Flags: append(adminFlags(
			&cli.IntFlag{Name: "broker-id", Value: -1, EnvVars: env("broker-id"), Usage: "only partitions led by this leader"},
			&cli.StringFlag{Name: "topic", EnvVars: env("topic"), Usage: "only this topic"},
			&cli.IntFlag{Name: "partition", Value: -1, EnvVars: env("partition"), Usage: "only this partition (with --topic)"},
			&cli.DurationFlag{Name: "max-transaction-timeout", Value: 15 * time.Minute, EnvVars: env("max-transaction-timeout"), Usage: "a transaction open longer than this at a leader is a candidate"},
		), kafkaFlags()...),
		Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
			sel := selection{brokerID: int32(c.Int("broker-id")), topic: c.String("topic"), partition: int32(c.Int("partition"))}
			if (sel.brokerID >= 0) == (sel.topic != "") {
				return usagef("give exactly one of --broker-id or --topic")
			}
			if sel.partition >= 0 && sel.topic == "" {
				return usagef("--partition needs --topic")
			}
			hanging, err := findHanging(ctx, c, cl, sel, c.Duration("max-transaction-timeout"))
			if err != nil {
				return err
			}
			if out == "json" {
				if hanging == nil {
					hanging = []hangingTxn{}
				}
				return printJSON(c.App.Writer, hanging)
			}
			t := tableFor(c, "Topic", "Partition", "Leader", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset", "LastTimestamp", "Reason")
			for _, h := range hanging {
				t.Row(h.Topic, fmt.Sprint(h.Partition), fmt.Sprint(h.Leader), fmt.Sprint(h.ProducerID), fmt.Sprint(h.ProducerEpoch),
					fmt.Sprint(h.CoordinatorEpoch), fmt.Sprint(h.CurrentTxnStartOffset), msTime(h.LastTimestampMs), h.Reason)
			}
			return t.Flush()
		}),
	}
}

func findHanging(ctx context.Context, c *cli.Context, cl *admin.Client, sel selection, maxTimeout time.Duration) ([]hangingTxn, error) {
	r, err := connectLeaders(ctx, c, cl)
	if err != nil {
		return nil, err
	}
	defer r.close()
	set, err := r.partitions(ctx, sel)
	if err != nil || len(set) == 0 {
		return nil, err
	}
	described, err := r.describeProducers(ctx, set)
	if err != nil {
		return nil, err
	}
	// What the coordinator knows as open: producer id → partitions.
	txns, err := cl.Transactions(ctx, admin.ListFilter{})
	if err != nil {
		return nil, err
	}
	open := map[int64]map[string]bool{}
	for _, t := range txns {
		switch t.State {
		case "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
		default:
			continue
		}
		m := map[string]bool{}
		for _, p := range t.Partitions {
			m[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = true
		}
		if t.Completing != nil {
			// The previous transaction, its markers still being
			// written: open at the leaders for a moment, not hanging.
			for _, p := range t.Completing.Partitions {
				m[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = true
			}
		}
		open[t.ProducerID] = m
	}
	now := time.Now()
	var out []hangingTxn
	for _, d := range described.SortedProducers() {
		if d.CurrentTxnStartOffset < 0 || now.Sub(time.UnixMilli(d.LastTimestamp)) < maxTimeout {
			continue
		}
		parts, known := open[d.ProducerID]
		reason := ""
		switch {
		case !known:
			reason = "the coordinator has no open transaction for this producer id"
		case !parts[fmt.Sprintf("%s-%d", d.Topic, d.Partition)]:
			reason = "the coordinator's open transaction for this producer id does not include this partition"
		default:
			continue
		}
		out = append(out, hangingTxn{Topic: d.Topic, Partition: d.Partition, Leader: d.Leader, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
			CoordinatorEpoch: d.CoordinatorEpoch, CurrentTxnStartOffset: d.CurrentTxnStartOffset, LastTimestampMs: d.LastTimestamp, Reason: reason})
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].Topic < out[j].Topic || out[i].Topic == out[j].Topic && out[i].Partition < out[j].Partition
	})
	return out, nil
}

func leadersCommand() *cli.Command {
	return &cli.Command{
		Name:        "leaders",
		Usage:       "per leader: Kafka version, negotiated WriteTxnMarkers versions, connection, queued and stuck markers",
		Description: "Example:\n   txncoord leaders -o json",
		Flags:       adminFlags(),
		Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
			leaders, err := cl.Leaders(ctx)
			if err != nil {
				return err
			}
			if out == "json" {
				return printJSON(c.App.Writer, leaders)
			}
			if coords, err := cl.Coordinators(ctx); err == nil && len(coords) > 1 && len(leaders) > 0 {
				// Several coordinators: each sends the markers of its own
				// partitions, so the queues below are this one's only.
				fmt.Fprintf(c.App.Writer, "Marker sender of coordinator %d (each coordinator sends the markers of the partitions it owns: ask another with --admin URL).\n", leaders[0].Sender)
			}
			t := tableFor(c, "NodeId", "Addr", "KafkaVersion", "WriteTxnMarkers", "InUse", "Connected", "Queued", "Stuck", "LastError")
			for _, l := range leaders {
				t.Row(fmt.Sprint(l.NodeID), l.Addr, l.KafkaVersion,
					fmt.Sprintf("%d-%d", l.WriteTxnMarkers.Min, l.WriteTxnMarkers.Max), fmt.Sprint(l.WriteTxnMarkers.InUse),
					fmt.Sprint(l.Connected), fmt.Sprint(l.QueuedMarkers), fmt.Sprint(l.StuckTransactions), l.LastError)
			}
			return t.Flush()
		}),
	}
}

func markersCommand() *cli.Command {
	return &cli.Command{
		Name:        "markers",
		Usage:       "pending and stuck transaction markers per leader",
		Description: "Example:\n   txncoord markers -o json",
		Flags:       adminFlags(),
		Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
			markers, err := cl.Markers(ctx)
			if err != nil {
				return err
			}
			if out == "json" {
				return printJSON(c.App.Writer, markers)
			}
			t := tableFor(c, "TransactionalId", "Result", "ProducerId", "MarkerEpoch", "TV", "Partition", "Leader", "Attempts", "LastError", "State")
			for _, m := range markers {
				state := "pending"
				if m.Stuck {
					state = "STUCK: " + m.Reason
				}
				for _, p := range m.Partitions {
					t.Row(m.TransactionalID, m.Result, fmt.Sprint(m.ProducerID), fmt.Sprint(m.ProducerEpoch),
						fmt.Sprint(m.TransactionVersion), fmt.Sprintf("%s-%d", p.Topic, p.Partition), fmt.Sprint(p.Leader),
						fmt.Sprint(p.Attempts), p.LastError, state)
				}
			}
			return t.Flush()
		}),
	}
}
