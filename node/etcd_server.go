package node

import (
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// EmbeddedEtcd is the one-member etcd `txncoord up --coordinators C`
// starts when no --etcd-endpoints are given: real etcd (Raft, its WAL and
// bbolt, fsync on), in this process, its data under DATA_DIR/etcd. It
// makes the multi-coordinator mode runnable on one machine; a production
// cluster names a three- or five-member etcd of its own.
type EmbeddedEtcd struct {
	etcd *embed.Etcd
	// ClientURL is the URL clients dial (http://host:port).
	ClientURL string
}

// etcdStartTimeout bounds the start of the embedded member (a restart
// replays its WAL).
const etcdStartTimeout = 60 * time.Second

// StartEmbeddedEtcd starts a single-member etcd in dir, serving clients on
// clientAddr and its (unused) peer port on peerAddr, both host:port.
func StartEmbeddedEtcd(dir, clientAddr, peerAddr string) (*EmbeddedEtcd, error) {
	client, err := url.Parse("http://" + clientAddr)
	if err != nil {
		return nil, fmt.Errorf("etcd client address %q: %w", clientAddr, err)
	}
	peer, err := url.Parse("http://" + peerAddr)
	if err != nil {
		return nil, fmt.Errorf("etcd peer address %q: %w", peerAddr, err)
	}
	cfg := embed.NewConfig()
	cfg.Name = "txncoord"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.InitialClusterToken = "txncoord-embedded"
	// One member elects itself: a short election timeout makes a restart
	// serve sooner. Not shorter: Raft ticks at every TickMs even with
	// nothing to do (10 ms cost an idle `up --coordinators 3` 1% of a core
	// and saved under 0.1 s of a restart against 50).
	cfg.TickMs, cfg.ElectionMs = 50, 250
	// Every transaction and offset write replaces a key: compact the
	// history an hour back, or etcd's database grows without end (an
	// external etcd needs --auto-compaction-retention too; README).
	cfg.AutoCompactionMode, cfg.AutoCompactionRetention = "periodic", "1h"
	cfg.EnableGRPCGateway = false
	cfg.ListenMetricsUrls = nil
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	case <-time.After(etcdStartTimeout):
		e.Close()
		return nil, fmt.Errorf("embedded etcd: not ready after %s", etcdStartTimeout)
	}
	return &EmbeddedEtcd{etcd: e, ClientURL: client.String()}, nil
}

// Close stops the member.
func (e *EmbeddedEtcd) Close() {
	e.etcd.Close()
}
