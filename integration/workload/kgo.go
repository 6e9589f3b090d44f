package workload

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/txncoord/txncoord/integration/checker"
)

// KgoTV2 runs the workload with franz-go at its default versions: against a
// cluster that finalizes transaction.version=2 it uses TV2 (EndTxn v5, no
// AddPartitionsToTxn, an epoch bump per transaction).
func KgoTV2(ctx context.Context, cfg Config) (checker.History, error) {
	return run(ctx, cfg, "kgo-tv2", func(ctx context.Context, cfg Config) (txnClient, error) {
		return newKgo(ctx, cfg)
	})
}

// KgoTV1 runs the workload with franz-go held at Kafka 3.9's versions
// (EndTxn v4, AddPartitionsToTxn v3): TV1 even where TV2 is finalized.
func KgoTV1(ctx context.Context, cfg Config) (checker.History, error) {
	return run(ctx, cfg, "kgo-tv1", func(ctx context.Context, cfg Config) (txnClient, error) {
		return newKgo(ctx, cfg, kgo.MaxVersions(kversion.V3_9_0()))
	})
}

type kgoClient struct{ cl *kgo.Client }

func newKgo(ctx context.Context, cfg Config, extra ...kgo.Opt) (*kgoClient, error) {
	secOpts, err := cfg.Security.kgoOpts()
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Bootstrap...),
		kgo.TransactionalID(cfg.TransactionalID),
		kgo.TransactionTimeout(cfg.TxnTimeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ClientID("txncoord-workload-kgo"),
		// Fail fast enough for the loop to record an outcome and
		// start over, rather than retrying inside one operation
		// for the whole OpTimeout.
		kgo.RecordDeliveryTimeout(cfg.OpTimeout),
	}, secOpts...)
	opts = append(opts, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &kgoClient{cl: cl}, nil
}

func (k *kgoClient) begin(context.Context) error { return k.cl.BeginTransaction() }

func (k *kgoClient) produce(ctx context.Context, writes []checker.Write) error {
	recs := make([]*kgo.Record, len(writes))
	for i, w := range writes {
		recs[i] = &kgo.Record{Topic: w.Partition.Topic, Partition: w.Partition.Partition, Value: []byte(w.Value)}
	}
	return k.cl.ProduceSync(ctx, recs...).FirstErr()
}

func (k *kgoClient) commit(ctx context.Context) error { return k.cl.EndTransaction(ctx, kgo.TryCommit) }

func (k *kgoClient) abort(ctx context.Context) error {
	// Records buffered after a produce error must be purged before an
	// abort can be sent.
	if err := k.cl.AbortBufferedRecords(ctx); err != nil {
		return err
	}
	return k.cl.EndTransaction(ctx, kgo.TryAbort)
}

func (k *kgoClient) close() { k.cl.Close() }
