package eos

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"
)

// MemberConfig configures one member process of a stage.
type MemberConfig struct {
	Client    string // kgo, sarama, confluent
	Bootstrap []string
	Stage     int
	Group     string
	From, To  string
	// Name is unique per process (stage, slot, incarnation: s1.m2.i0);
	// transaction ids are Name/seq.
	Name string
	// TxnID is the transactional id: one per slot, kept across
	// incarnations, so a restarted member fences what its killed
	// predecessor left open instead of leaving it to the timeout.
	TxnID   string
	History string // path of the history file
	// AbortP is the probability of aborting a transaction on purpose
	// after producing it.
	AbortP float64
	Seed   int64
	// BatchMax bounds the records per transaction (default 50).
	BatchMax int
	// Pause is a sleep after each transaction: it paces a small run so
	// that churn and faults land while it is going.
	Pause time.Duration
	// SessionTimeout of the group member (default 6 s, Kafka's minimum).
	SessionTimeout time.Duration
	// TxnTimeout is the transaction timeout (default 10 s).
	TxnTimeout time.Duration
}

func (c *MemberConfig) defaults() error {
	if c.Name == "" || c.Group == "" || c.From == "" || c.To == "" || c.TxnID == "" || c.History == "" || len(c.Bootstrap) == 0 {
		return errors.New("eos: member needs name, group, from, to, txn id, history and bootstrap")
	}
	if c.BatchMax <= 0 {
		c.BatchMax = 50
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 6 * time.Second
	}
	if c.TxnTimeout <= 0 {
		c.TxnTimeout = 10 * time.Second
	}
	return nil
}

// member is the shared part of every client's loop: naming transactions,
// recording them, and the random aborts.
type member struct {
	cfg MemberConfig
	rec *Recorder
	rng *rand.Rand
	seq int
}

func (m *member) nextID() string {
	id := fmt.Sprintf("%s/%d", m.cfg.Name, m.seq)
	m.seq++
	return id
}

// abortNow draws whether this transaction aborts on purpose.
func (m *member) abortNow() bool { return m.rng.Float64() < m.cfg.AbortP }

func (m *member) assigned(gen int32, parts []int32) {
	m.rec.Record(Line{Ev: "assigned", Gen: gen, Parts: parts})
}

func (m *member) revoked(parts []int32) { m.rec.Record(Line{Ev: "revoked", Parts: parts}) }

// begin records a transaction before anything of it is produced.
func (m *member) begin(id string, in []Consumed) ([]Produced, error) {
	out := make([]Produced, len(in))
	for i, c := range in {
		out[i] = Produced{P: c.P, V: Transform(c.V, id)}
	}
	return out, m.rec.Record(Line{Ev: "txn", ID: id, In: in, Out: out})
}

// committing records that the commit is about to be asked for: from here
// on, without an answer, the outcome is unknown.
func (m *member) committing(id string) error { return m.rec.Record(Line{Ev: "commit", ID: id}) }

func (m *member) end(id, outcome string, err error) {
	e := Line{Ev: "end", ID: id, Outcome: outcome}
	if err != nil {
		e.Err = err.Error()
	}
	m.rec.Record(e)
	time.Sleep(m.cfg.Pause)
}

// RunMember runs one member until ctx is done (a graceful stop: the open
// transaction, if any, is aborted and the member leaves its group) or an
// error the member cannot go on from.
func RunMember(ctx context.Context, cfg MemberConfig) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	rec, err := NewRecorder(cfg.History)
	if err != nil {
		return err
	}
	defer rec.Close()
	m := &member{cfg: cfg, rec: rec, rng: rand.New(rand.NewSource(cfg.Seed))}
	if err := rec.Record(Line{Ev: "start", Member: cfg.Name, Stage: cfg.Stage, Client: cfg.Client, TxnID: cfg.TxnID}); err != nil {
		return err
	}
	switch cfg.Client {
	case "kgo":
		err = runKgo(ctx, m)
	case "sarama":
		err = runSarama(ctx, m)
	case "confluent":
		err = runConfluent(ctx, m)
	default:
		err = fmt.Errorf("eos: unknown client %q", cfg.Client)
	}
	if err == nil {
		rec.Record(Line{Ev: "stop"})
	}
	return err
}
