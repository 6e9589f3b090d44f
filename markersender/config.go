package markersender

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/durable"
	"github.com/txncoord/txncoord/faults"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/txntimeline"
)

// Config configures a Sender. Zero values take the documented defaults.
type Config struct {
	// CoordinatorVersion is the coordinator's profile, "4.2" (default) or
	// "4.1"; a 4.1 coordinator never sends above WriteTxnMarkers v1.
	CoordinatorVersion string
	// Router finds partition leaders (*cluster.View).
	Router Router
	// Leaders are the known leaders: they are connected at Start so their
	// negotiated versions show in Leaders() before any marker.
	Leaders []cluster.Node
	// Discovery chooses the version per leader from its ApiVersions (the
	// CLI default). False always sends v2, reproducing Kafka 4.2.0
	// (--marker-version-discovery=false).
	Discovery bool
	// RequestTimeout bounds one request (default 30 s).
	RequestTimeout time.Duration
	// BackoffMin and BackoffMax bound the capped exponential backoff with
	// jitter between retries of a partition's marker (defaults 50 ms, 5 s).
	BackoffMin, BackoffMax time.Duration
	// MaxInFlight is the number of requests in flight per leader (default
	// 1, as Kafka's marker sender); each uses its own connection.
	MaxInFlight int
	// MaxMarkersPerRequest caps the partition markers in one request
	// (default 0: everything queued for the leader goes in one request).
	MaxMarkersPerRequest int
	// StuckAfterV2Closes is how many times a leader that advertises max v1
	// may close the connection on a v2 request for one marker before its
	// transaction is reported stuck (default 3). Only reachable with
	// Discovery off: with discovery, v2 never goes to such a leader.
	StuckAfterV2Closes int
	// StuckAfterRefusals is how many answers in a row saying that a
	// partition's marker cannot be delivered (no known leader,
	// NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION while the Router
	// still knows the partition) make its transaction stuck (default 8:
	// about 6 s of backoff). Kafka retries them forever.
	StuckAfterRefusals int
	// ProbeInterval is how often an idle, disconnected leader is
	// reconnected so Leaders() shows its current version (default 5 s).
	ProbeInterval time.Duration
	Log           zerolog.Logger
	// Metrics registers the txncoord_marker* collectors; nil skips it.
	Metrics prometheus.Registerer
	// LeaderLog is the log the leader at addr appends to, when it is one
	// of this process (`txncoord up`), nil otherwise: a leader whose log
	// is a transaction's Txn.At may get its markers before the Prepare is
	// durable. Nil: every leader waits for durability.
	LeaderLog func(addr string) durable.Log
	// Dial opens a connection to a leader (a TCP wire.Client, or an
	// in-process wire.LocalClient for a leader in this process); nil uses
	// wire.Dial.
	Dial func(ctx context.Context, addr string) (negotiation.Transport, error)
	// Faults, when set, may hold the requests to a leader (a fault
	// injected on demand, faults.HoldMarkers).
	Faults *faults.Set
	// Timeline, optional, records each marker sent and its answer per
	// partition (the admin API's transaction timeline).
	Timeline *txntimeline.Recorder
}

func (c *Config) defaults() {
	if c.CoordinatorVersion == "" {
		c.CoordinatorVersion = "4.2"
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = 50 * time.Millisecond
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = max(5*time.Second, c.BackoffMin)
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 1
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = 5 * time.Second
	}
	if c.StuckAfterV2Closes <= 0 {
		c.StuckAfterV2Closes = 3
	}
	if c.StuckAfterRefusals <= 0 {
		c.StuckAfterRefusals = 8
	}
}
