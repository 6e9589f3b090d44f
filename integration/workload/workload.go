package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/integration/checker"
)

// Config configures one transactional producer.
type Config struct {
	// Bootstrap addresses of the cluster.
	Bootstrap []string
	// TransactionalID of the producer (required).
	TransactionalID string
	// Prefix of every value (default TransactionalID); values are
	// Prefix-N, so two drivers of one run need distinct prefixes.
	Prefix string
	// Partitions the values go to; each value picks one at random.
	Partitions []checker.Partition
	// TxnSize is the number of values per transaction (default 10).
	TxnSize int
	// Txns is the number of transactions; 0 runs until ctx is done.
	Txns int
	// AbortP is the probability of aborting a transaction instead of
	// committing it.
	AbortP float64
	// Seed seeds the random choices (partitions, aborts).
	Seed int64
	// TxnTimeout is the transaction timeout sent in InitProducerId
	// (default 30 s).
	TxnTimeout time.Duration
	// OpTimeout bounds each client operation (default 30 s).
	OpTimeout time.Duration
	// MaxFailures is the number of consecutive failed transactions after
	// which the driver gives up (default 10).
	MaxFailures int
	// Security, when set, connects with TLS and SASL; nil is plaintext.
	Security *Security
	// Log is not sent to sarama's child process (saramachild.go):
	// the child's log lines are written to it as they come.
	Log zerolog.Logger `json:"-"`
}

// Driver runs a workload and returns its history. The history is valid
// (every transaction attempted, with its outcome) even when err != nil.
type Driver func(ctx context.Context, cfg Config) (checker.History, error)

// Drivers are the client drivers by name, for matrices.
var Drivers = map[string]Driver{
	"kgo-tv2":   KgoTV2,
	"kgo-tv1":   KgoTV1,
	"sarama":    Sarama,
	"confluent": Confluent,
}

func (c *Config) defaults() error {
	if c.TransactionalID == "" {
		return errors.New("workload: no transactional id")
	}
	if len(c.Bootstrap) == 0 {
		return errors.New("workload: no bootstrap addresses")
	}
	if len(c.Partitions) == 0 {
		return errors.New("workload: no partitions")
	}
	if c.Prefix == "" {
		c.Prefix = c.TransactionalID
	}
	if c.TxnSize <= 0 {
		c.TxnSize = 10
	}
	if c.TxnTimeout <= 0 {
		c.TxnTimeout = 30 * time.Second
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = 30 * time.Second
	}
	if c.MaxFailures <= 0 {
		c.MaxFailures = 10
	}
	if c.Security != nil {
		if _, err := c.Security.mechanism(); err != nil {
			return err
		}
	}
	return nil
}

// txnClient is what the loop needs from one client library. produce sends
// the writes and returns once all are acknowledged (or one failed).
type txnClient interface {
	begin(ctx context.Context) error
	produce(ctx context.Context, writes []checker.Write) error
	commit(ctx context.Context) error
	abort(ctx context.Context) error
	close()
}

// run is the loop shared by every driver.
func run(ctx context.Context, cfg Config, client string, newClient func(ctx context.Context, cfg Config) (txnClient, error)) (checker.History, error) {
	var h checker.History
	if err := cfg.defaults(); err != nil {
		return h, err
	}
	log := cfg.Log.With().Str("txn_id", cfg.TransactionalID).Str("client", client).Logger()
	rng := rand.New(rand.NewSource(cfg.Seed))
	var (
		cl       txnClient
		failures int
		lastErr  error
		next     int // value counter
	)
	defer func() {
		if cl != nil {
			cl.close()
		}
	}()
	// fail drops the client after an error: the next transaction starts
	// with a new one, whose InitProducerId fences the old producer.
	fail := func(err error) {
		failures++
		lastErr = err
		if cl != nil {
			cl.close()
			cl = nil
		}
	}
	for i := 0; cfg.Txns == 0 || i < cfg.Txns; i++ {
		if ctx.Err() != nil {
			break
		}
		if failures >= cfg.MaxFailures {
			return h, fmt.Errorf("workload %s: %d transactions failed in a row, last: %w", cfg.TransactionalID, failures, lastErr)
		}
		// Draw every random choice up front so that one run's choices
		// do not depend on where errors happened.
		abort := rng.Float64() < cfg.AbortP
		txn := checker.Txn{ID: fmt.Sprintf("%s/%d", cfg.Prefix, i), Producer: cfg.TransactionalID, Outcome: checker.Open}
		for j := 0; j < cfg.TxnSize; j++ {
			txn.Writes = append(txn.Writes, checker.Write{
				Value:     fmt.Sprintf("%s-%d", cfg.Prefix, next),
				Partition: cfg.Partitions[rng.Intn(len(cfg.Partitions))],
			})
			next++
		}
		if cl == nil {
			var err error
			opCtx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
			cl, err = newClient(opCtx, cfg)
			cancel()
			if err != nil {
				log.Warn().Err(err).Msg("client init failed")
				cl = nil
				fail(err)
				continue
			}
		}
		if err := op(ctx, cfg, cl.begin); err != nil {
			log.Warn().Err(err).Msg("begin failed")
			fail(err)
			continue
		}
		// From here on records may exist: the transaction is recorded
		// whatever happens.
		produceErr := op(ctx, cfg, func(ctx context.Context) error { return cl.produce(ctx, txn.Writes) })
		if produceErr != nil || abort || ctx.Err() != nil {
			// Abort even when ctx is done, so the final read does
			// not wait for the transaction timeout.
			err := op(context.WithoutCancel(ctx), cfg, cl.abort)
			txn.Outcome = checker.Aborted
			h.Txns = append(h.Txns, txn)
			if err = errors.Join(produceErr, err); err != nil {
				log.Warn().Err(err).Str("txn", txn.ID).Msg("transaction failed; aborted")
				fail(err)
				continue
			}
			failures = 0
			continue
		}
		if err := op(context.WithoutCancel(ctx), cfg, cl.commit); err != nil {
			// The commit may or may not have happened.
			txn.Outcome = checker.Unknown
			h.Txns = append(h.Txns, txn)
			log.Warn().Err(err).Str("txn", txn.ID).Msg("commit failed; outcome unknown")
			op(context.WithoutCancel(ctx), cfg, cl.abort)
			fail(err)
			continue
		}
		txn.Outcome = checker.Committed
		h.Txns = append(h.Txns, txn)
		failures = 0
	}
	return h, nil
}

// op runs one client operation under OpTimeout.
func op(ctx context.Context, cfg Config, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
	defer cancel()
	return f(ctx)
}
