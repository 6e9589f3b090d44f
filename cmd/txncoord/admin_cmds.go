package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/urfave/cli/v2"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/security"
)

func adminFlags(extra ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "admin", Value: "http://127.0.0.1:9644", EnvVars: env("admin"), Usage: "admin API base URL"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", EnvVars: env("output"), Usage: "table or json"},
		&cli.StringFlag{Name: "token", EnvVars: env("admin-token"), Usage: "admin API bearer token (up --secure writes it to DATA_DIR/security/admin.token)"},
	}, extra...)
}

// adminAction checks the common flags and hands the command an admin client.
func adminAction(fn func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() > 0 {
			return usagef("%s takes named flags only, got %q", c.Command.FullName(), c.Args().Slice())
		}
		out := outputFormat(c.String("output"))
		if out != "table" && out != "json" {
			return usagef("-o %q: want table or json", out)
		}
		ctx, cancel := context.WithTimeout(c.Context, 60*time.Second)
		defer cancel()
		return fn(c, ctx, admin.NewClientWithToken(c.String("admin"), c.String("token")), out)
	}
}

type outputFormat string

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printTable(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
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
					txns, err := cl.Transactions(ctx, admin.ListFilter{State: c.String("state"), MinDuration: c.Duration("duration-filter")})
					if err != nil {
						return err
					}
					if out == "json" {
						return printJSON(c.App.Writer, txns)
					}
					rows := make([][]string, 0, len(txns))
					for _, t := range txns {
						rows = append(rows, []string{t.TransactionalID, fmt.Sprint(t.CoordinatorID), fmt.Sprint(t.ProducerID), fmt.Sprint(t.ProducerEpoch), t.State, fmt.Sprint(t.TransactionVersion)})
					}
					printTable(c.App.Writer, []string{"TransactionalId", "Coordinator", "ProducerId", "ProducerEpoch", "State", "TV"}, rows)
					return nil
				}),
			},
			{
				Name:        "describe",
				Usage:       "describe one transaction",
				Description: "Example:\n   txncoord txn describe --transactional-id orders-app-1",
				Flags:       adminFlags(txnIDFlag()),
				Action: txnIDAction(func(_ *cli.Context, ctx context.Context, cl *admin.Client, id string) (admin.Txn, error) {
					return cl.Transaction(ctx, id)
				}, func(w io.Writer, t admin.Txn) {
					printTable(w,
						[]string{"TransactionalId", "ProducerId", "ProducerEpoch", "State", "TimeoutMs", "TV", "StartTime", "Duration", "Partitions", "StuckReason"},
						[][]string{{t.TransactionalID, fmt.Sprint(t.ProducerID), fmt.Sprint(t.ProducerEpoch), t.State, fmt.Sprint(t.TimeoutMs),
							fmt.Sprint(t.TransactionVersion), msTime(t.StartTimeMs), (time.Duration(t.DurationMs) * time.Millisecond).String(), partitionsString(t), t.StuckReason}})
				}),
			},
			{
				Name:  "abort",
				Usage: "ABORT an open transaction: its records become invisible to read_committed consumers",
				Description: `Example:
   txncoord txn abort --transactional-id orders-app-1 --yes

Asks before it acts unless --yes is given; without a terminal, --yes is required.`,
				Flags: adminFlags(
					txnIDFlag(),
					&cli.BoolFlag{Name: "yes", Usage: "do not ask for confirmation"},
				),
				Action: txnIDAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, id string) (admin.Txn, error) {
					t, err := cl.Transaction(ctx, id)
					if err != nil {
						return t, err
					}
					fmt.Fprintf(c.App.ErrWriter, "This will ABORT transaction %q (producer id %d, epoch %d, state %s, %d partitions): its records will never be visible to read_committed consumers, and the producer will be fenced.\n",
						id, t.ProducerID, t.ProducerEpoch, t.State, len(t.Partitions))
					if !c.Bool("yes") {
						if !isatty.IsTerminal(os.Stdin.Fd()) {
							return t, usagef("refusing to abort without --yes when standard input is not a terminal")
						}
						fmt.Fprint(c.App.ErrWriter, "Abort it? [y/N] ")
						line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
						if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
							return t, fmt.Errorf("not aborted")
						}
					}
					return cl.Abort(ctx, id)
				}, func(w io.Writer, t admin.Txn) {
					fmt.Fprintf(w, "aborting %s: state %s, producer id %d, epoch %d\n", t.TransactionalID, t.State, t.ProducerID, t.ProducerEpoch)
				}),
			},
			{
				Name:        "retry-markers",
				Usage:       "resend the markers of a transaction reported stuck (see txncoord markers)",
				Description: "Example:\n   txncoord txn retry-markers --transactional-id orders-app-1",
				Flags:       adminFlags(txnIDFlag()),
				Action: txnIDAction(func(_ *cli.Context, ctx context.Context, cl *admin.Client, id string) (admin.Txn, error) {
					return cl.RetryMarkers(ctx, id)
				}, func(w io.Writer, t admin.Txn) {
					fmt.Fprintf(w, "resending the markers of %s (state %s)\n", t.TransactionalID, t.State)
				}),
			},
			findHangingCommand(),
		},
	}
}

func txnIDFlag() cli.Flag {
	return &cli.StringFlag{Name: "transactional-id", EnvVars: env("transactional-id"), Usage: "the transactional id"}
}

// txnIDAction runs one admin call on --transactional-id and prints the
// transaction it returns as JSON or with text.
func txnIDAction(call func(c *cli.Context, ctx context.Context, cl *admin.Client, id string) (admin.Txn, error), text func(io.Writer, admin.Txn)) cli.ActionFunc {
	return adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
		id := c.String("transactional-id")
		if id == "" {
			return usagef("--transactional-id is required")
		}
		t, err := call(c, ctx, cl, id)
		if err != nil {
			return err
		}
		if out == "json" {
			return printJSON(c.App.Writer, t)
		}
		text(c.App.Writer, t)
		return nil
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

// kafkaAdmin connects a franz-go admin client to the leaders the admin API
// lists (over TLS and SASL as the flags say), for the commands that read
// the leaders directly.
func kafkaAdmin(ctx context.Context, c *cli.Context, cl *admin.Client) (*kadm.Client, func(), error) {
	secOpts, err := kafkaSecurity(c)
	if err != nil {
		return nil, nil, err
	}
	leaders, err := cl.Leaders(ctx)
	if err != nil {
		return nil, nil, err
	}
	seeds := make([]string, 0, len(leaders))
	for _, l := range leaders {
		seeds = append(seeds, l.Addr)
	}
	if len(seeds) == 0 {
		return nil, nil, fmt.Errorf("the admin API lists no leaders")
	}
	kc, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, secOpts...)...)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(kc), kc.Close, nil
}

func producersCommand() *cli.Command {
	return &cli.Command{
		Name:        "producers",
		Usage:       "describe the producers a partition's leader has state for (DescribeProducers)",
		Description: "Example:\n   txncoord producers --topic orders --partition 0",
		Flags: append(adminFlags(
			&cli.StringFlag{Name: "topic", EnvVars: env("topic"), Usage: "topic"},
			&cli.IntFlag{Name: "partition", Value: -1, EnvVars: env("partition"), Usage: "partition"},
		), kafkaFlags()...),
		Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
			topic, partition := c.String("topic"), int32(c.Int("partition"))
			if topic == "" || partition < 0 {
				return usagef("--topic and --partition are required")
			}
			adm, closeFn, err := kafkaAdmin(ctx, c, cl)
			if err != nil {
				return err
			}
			defer closeFn()
			described, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {partition: {}}})
			if err != nil {
				return err
			}
			p, ok := described[topic].Partitions[partition]
			if !ok {
				return fmt.Errorf("no answer for %s-%d", topic, partition)
			}
			if p.Err != nil {
				return fmt.Errorf("%s-%d: %w", topic, partition, p.Err)
			}
			producers := p.ActiveProducers.Sorted()
			if out == "json" {
				return printJSON(c.App.Writer, producers)
			}
			rows := make([][]string, 0, len(producers))
			for _, d := range producers {
				rows = append(rows, []string{fmt.Sprint(d.ProducerID), fmt.Sprint(d.ProducerEpoch), fmt.Sprint(d.CoordinatorEpoch),
					fmt.Sprint(d.LastSequence), msTime(d.LastTimestamp), fmt.Sprint(d.CurrentTxnStartOffset)})
			}
			printTable(c.App.Writer, []string{"ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp", "CurrentTransactionStartOffset"}, rows)
			return nil
		}),
	}
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
			brokerID, topic, partition := int32(c.Int("broker-id")), c.String("topic"), int32(c.Int("partition"))
			if (brokerID >= 0) == (topic != "") {
				return usagef("give exactly one of --broker-id or --topic")
			}
			if partition >= 0 && topic == "" {
				return usagef("--partition needs --topic")
			}
			hanging, err := findHanging(ctx, c, cl, brokerID, topic, partition, c.Duration("max-transaction-timeout"))
			if err != nil {
				return err
			}
			if out == "json" {
				if hanging == nil {
					hanging = []hangingTxn{}
				}
				return printJSON(c.App.Writer, hanging)
			}
			rows := make([][]string, 0, len(hanging))
			for _, h := range hanging {
				rows = append(rows, []string{h.Topic, fmt.Sprint(h.Partition), fmt.Sprint(h.Leader), fmt.Sprint(h.ProducerID), fmt.Sprint(h.ProducerEpoch),
					fmt.Sprint(h.CoordinatorEpoch), fmt.Sprint(h.CurrentTxnStartOffset), msTime(h.LastTimestampMs), h.Reason})
			}
			printTable(c.App.Writer, []string{"Topic", "Partition", "Leader", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset", "LastTimestamp", "Reason"}, rows)
			return nil
		}),
	}
}

func findHanging(ctx context.Context, c *cli.Context, cl *admin.Client, brokerID int32, topic string, partition int32, maxTimeout time.Duration) ([]hangingTxn, error) {
	adm, closeFn, err := kafkaAdmin(ctx, c, cl)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	set := kadm.TopicsSet{}
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	for _, td := range md.Topics.Sorted() {
		if topic != "" && td.Topic != topic {
			continue
		}
		for _, pd := range td.Partitions.Sorted() {
			if partition >= 0 && pd.Partition != partition || brokerID >= 0 && pd.Leader != brokerID {
				continue
			}
			set.Add(td.Topic, pd.Partition)
		}
	}
	if len(set) == 0 {
		return nil, nil
	}
	described, err := adm.DescribeProducers(ctx, set)
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
			rows := make([][]string, 0, len(leaders))
			for _, l := range leaders {
				rows = append(rows, []string{fmt.Sprint(l.NodeID), l.Addr, l.KafkaVersion,
					fmt.Sprintf("%d-%d", l.WriteTxnMarkers.Min, l.WriteTxnMarkers.Max), fmt.Sprint(l.WriteTxnMarkers.InUse),
					fmt.Sprint(l.Connected), fmt.Sprint(l.QueuedMarkers), fmt.Sprint(l.StuckTransactions), l.LastError})
			}
			printTable(c.App.Writer, []string{"NodeId", "Addr", "KafkaVersion", "WriteTxnMarkers", "InUse", "Connected", "Queued", "Stuck", "LastError"}, rows)
			return nil
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
			var rows [][]string
			for _, m := range markers {
				state := "pending"
				if m.Stuck {
					state = "STUCK: " + m.Reason
				}
				for _, p := range m.Partitions {
					rows = append(rows, []string{m.TransactionalID, m.Result, fmt.Sprint(m.ProducerID), fmt.Sprint(m.ProducerEpoch),
						fmt.Sprint(m.TransactionVersion), fmt.Sprintf("%s-%d", p.Topic, p.Partition), fmt.Sprint(p.Leader),
						fmt.Sprint(p.Attempts), p.LastError, state})
				}
			}
			printTable(c.App.Writer, []string{"TransactionalId", "Result", "ProducerId", "MarkerEpoch", "TV", "Partition", "Leader", "Attempts", "LastError", "State"}, rows)
			return nil
		}),
	}
}
