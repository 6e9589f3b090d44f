package node

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordclient"
)

// startEtcd starts the embedded etcd when the config asks for one, and the
// coordinators' shared client when the cluster file names etcd endpoints.
func (e *Embedded) startEtcd() error {
	if a := e.cfg.EtcdAddrs; a != nil {
		var err error
		if e.etcd, err = StartEmbeddedEtcd(filepath.Join(e.cfg.DataDir, "etcd"), a[0], a[1]); err != nil {
			return err
		}
	}
	if len(e.View.Etcd().Endpoints) == 0 {
		return nil
	}
	if e.etcd != nil {
		// The member's in-process client: no gRPC transport between
		// the coordinators and their etcd (measured: a fifth less CPU
		// per transaction, docs/bench/20261201-etcd3.md).
		e.etcdClient = v3client.New(e.etcd.etcd.Server)
		return nil
	}
	cl, err := DialEtcd(e.View)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	e.etcdClient = cl
	return nil
}

// coordinatorMetrics is coordinator id's registerer: the process registry,
// with a node label when there are several (each has its marker sender).
func (e *Embedded) coordinatorMetrics(id int32) prometheus.Registerer {
	if len(e.View.Coordinators()) == 1 {
		return e.Metrics
	}
	return prometheus.WrapRegistererWith(prometheus.Labels{"node": fmt.Sprint(id)}, e.Metrics)
}

// txnClients are the in-process clients of every coordinator, by node id.
func (e *Embedded) txnClients() map[int32]coordclient.Client {
	out := map[int32]coordclient.Client{}
	for id, c := range e.byNode {
		out[id] = c.leaderClient()
	}
	return out
}

// leaderCoordinatorClient is how an embedded leader reaches the
// coordinators: the one in-process, or each id's owner among several.
func (e *Embedded) leaderCoordinatorClient() coordclient.Client {
	if len(e.byNode) == 1 {
		return e.inProcess.leaderClient()
	}
	return coordclient.NewRouted(coordclient.RoutedConfig{Coordinators: e.txnClients(),
		Partitions: e.View.TransactionStatePartitions(), Log: e.cfg.Log})
}

// coordinatorByID is the coordinator node id of this process, or nil.
func (e *Embedded) coordinatorByID(id int32) *Coordinator {
	e.coordsMu.Lock()
	defer e.coordsMu.Unlock()
	for _, co := range e.Coordinators {
		if co.Node.NodeID == id {
			return co
		}
	}
	return nil
}

// followGroupHolder makes the shared view name the group coordinator's
// holder as the coordinators' lease members see it (several coordinators
// on etcd): the first running coordinator's view of it.
func (e *Embedded) followGroupHolder() {
	var hooks []func() (cluster.Node, bool)
	var members []*groupHolder
	for _, co := range e.Coordinators {
		if co.groups != nil {
			hooks = append(hooks, co.groups.holderNode(e.View))
			members = append(members, co.groups)
		}
	}
	if len(hooks) == 0 {
		return
	}
	e.View.SetGroupCoordinator(func() (cluster.Node, bool) {
		for i, h := range members {
			if h.member.Err() == nil {
				return hooks[i]()
			}
		}
		return hooks[0]()
	})
}

// WaitServing waits until the coordinators of several (etcd mode) serve
// every __transaction_state partition between them, so that a client's
// first InitProducerId after the ready line finds each id's coordinator
// instead of NOT_COORDINATOR; with one coordinator it returns at once.
func (e *Embedded) WaitServing(ctx context.Context) error {
	want := int(e.View.TransactionStatePartitions())
	for {
		served := map[int32]bool{}
		routed := false
		for _, co := range e.Coordinators {
			if co.Router == nil {
				continue
			}
			routed = true
			for p := range co.Router.Serving() {
				served[p] = true
			}
		}
		if !routed || len(served) == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d __transaction_state partitions served: %w", len(served), want, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
