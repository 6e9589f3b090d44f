package bench

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
)

// KfakeOptions configure the kfake peer.
type KfakeOptions struct {
	Brokers    int
	Topic      string
	Partitions int
	DataDir    string // "" = in memory
	Sync       bool   // SyncWrites: fsync per produced batch (needs DataDir)
}

// NewKfake starts a kfake cluster in this process, with the topic seeded.
func NewKfake(o KfakeOptions) (*kfake.Cluster, error) {
	if o.Sync && o.DataDir == "" {
		return nil, fmt.Errorf("kfake: --sync needs --data-dir")
	}
	opts := []kfake.Opt{kfake.NumBrokers(o.Brokers), kfake.SeedTopics(int32(o.Partitions), o.Topic)}
	if o.DataDir != "" {
		opts = append(opts, kfake.DataDir(o.DataDir))
	}
	if o.Sync {
		opts = append(opts, kfake.SyncWrites())
	}
	return kfake.NewCluster(opts...)
}

// ServeKfake is the serve-kfake child: it starts kfake, prints
// "kfake ready bootstrap=host:port,..." on out, and runs until ctx ends.
func ServeKfake(ctx context.Context, o KfakeOptions, out io.Writer) error {
	c, err := NewKfake(o)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := fmt.Fprintf(out, "kfake ready bootstrap=%s\n", strings.Join(c.ListenAddrs(), ",")); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
