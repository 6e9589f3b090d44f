package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// EtcdMemberOptions are one member of the scale run's etcd cluster of
// separate processes.
type EtcdMemberOptions struct {
	Name           string
	Dir            string
	PeerURL        string // http://host:port
	ClientURL      string // http://host:port; /metrics is served there too
	InitialCluster string // name=peerURL,...
	Token          string
}

// etcdMemberReadyWithin bounds a member's wait for its quorum.
const etcdMemberReadyWithin = 60 * time.Second

// ServeEtcdMember is the serve-etcd child: one etcd member with etcd's
// production defaults (100 ms heartbeat, 1 s election timeout, fsync on),
// which prints "etcd ready bootstrap=host:port" once it has joined a
// quorum and runs until ctx ends. Every member must be starting for any
// to be ready.
func ServeEtcdMember(ctx context.Context, o EtcdMemberOptions, out io.Writer) error {
	peer, err := url.Parse(o.PeerURL)
	if err != nil {
		return err
	}
	client, err := url.Parse(o.ClientURL)
	if err != nil {
		return err
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = o.Name, o.Dir
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.InitialCluster, cfg.InitialClusterToken = o.InitialCluster, o.Token
	cfg.ClusterState = embed.ClusterStateFlagNew
	// Every write of txncoord replaces a key: without compaction the
	// revisions pile up, as the README tells operators of an external etcd.
	cfg.AutoCompactionMode, cfg.AutoCompactionRetention = "periodic", "5m"
	cfg.LogLevel = "warn"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return err
	case <-time.After(etcdMemberReadyWithin):
		return fmt.Errorf("etcd member %s: no quorum within %s", o.Name, etcdMemberReadyWithin)
	case <-ctx.Done():
		return ctx.Err()
	}
	if _, err := fmt.Fprintf(out, "etcd ready bootstrap=%s\n", client.Host); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return err
	}
}

func serveEtcdMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve-etcd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o EtcdMemberOptions
	fs.StringVar(&o.Name, "name", "m0", "member name")
	fs.StringVar(&o.Dir, "data-dir", "", "member data dir")
	fs.StringVar(&o.PeerURL, "peer-url", "", "peer URL (http://host:port)")
	fs.StringVar(&o.ClientURL, "client-url", "", "client URL (http://host:port), /metrics too")
	fs.StringVar(&o.InitialCluster, "initial-cluster", "", "name=peerURL,... of every member")
	fs.StringVar(&o.Token, "token", "txncoord-bench", "initial cluster token")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := ServeEtcdMember(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "serve-etcd:", err)
		return 1
	}
	return 0
}
