package node

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordclient"
	"github.com/txncoord/txncoord/topics"
	"github.com/txncoord/txncoord/txnetcd"
	"github.com/txncoord/txncoord/wire"
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
	var kv pb.KVClient
	if e.etcd != nil {
		// The member's in-process client: no gRPC transport between
		// the coordinators and their etcd (measured: a fifth less CPU
		// per transaction, docs/bench/20261201-etcd3.md). The writer
		// of the transactions' state sends to the member's KV server
		// itself (txnetcd.Options.KV).
		e.etcdClient = v3client.New(e.etcd.etcd.Server)
		kv = adapter.KvServerToKvClient(v3rpc.NewQuotaKVServer(e.etcd.etcd.Server))
	} else {
		cl, err := DialEtcd(e.View)
		if err != nil {
			return fmt.Errorf("etcd: %w", err)
		}
		e.etcdClient = cl
	}
	// One store for every coordinator of the process: its one writer puts
	// the writes all of them queued while an etcd Txn was in flight in
	// the next, one Raft proposal (one WAL entry, apply and round trip)
	// where each coordinator's writer made its own (measured at 64
	// producers: half the proposals per transaction, a quarter less
	// etcd CPU). Each partition's write is still fenced on its owner key.
	e.etcdStore = txnetcd.NewStore(e.etcdClient, txnetcd.Options{Layout: txnetcd.Layout{Prefix: e.View.Etcd().Prefix},
		Partitions: e.View.TransactionStatePartitions(), KV: kv})
	if e.Metrics != nil {
		e.Metrics.MustRegister(etcdWriterTotals(e.etcdStore))
	}
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
	var hooks []func(int32) (cluster.Node, bool)
	var members []*groupHolder
	for _, co := range e.Coordinators {
		if co.groups != nil {
			hooks = append(hooks, co.groups.ownerNode(e.View))
			members = append(members, co.groups)
		}
	}
	if len(hooks) == 0 {
		return
	}
	e.View.SetGroupCoordinatorOf(func(p int32) (cluster.Node, bool) {
		for i, h := range members {
			if h.member.Err() == nil {
				return hooks[i](p)
			}
		}
		return hooks[0](p)
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

// openLeasedController prepares the process for a controller that moves
// between its coordinators (several coordinators on etcd): the topics and
// the security metadata of the shared store (a single coordinator's, or
// those of several coordinators before the controller moved to etcd) are
// copied into etcd once; the view shows etcd's topics and enforces its
// security metadata before the leaders recover and before a holder
// serves (a topic a leader holds that etcd does not list is dropped).
func (e *Embedded) openLeasedController() error {
	seedControllerRecords(e.etcdClient, e.View, e.Shared, e.cfg.Log)
	if err := showControllerRecords(e.etcdClient, e.View); err != nil {
		return fmt.Errorf("topics in etcd: %w", err)
	}
	return nil
}

// controllerHolder is the coordinator of this process holding the
// controller's lease: of the holders the running coordinators' members
// see, the one at the highest epoch (a paused member still sees the
// holder it knew).
func (e *Embedded) controllerHolder() (int32, bool) {
	e.coordsMu.Lock()
	defer e.coordsMu.Unlock()
	holder, best := int32(0), int32(-1)
	for _, co := range e.Coordinators {
		if co.ctl == nil || co.ctl.member.Err() != nil {
			continue
		}
		if id, epoch, ok := co.ctl.Holder(); ok && epoch > best {
			holder, best = id, epoch
		}
	}
	return holder, best >= 0
}

// runningController is the controller a coordinator of this process runs.
func (e *Embedded) runningController() *topics.Controller {
	e.coordsMu.Lock()
	defer e.coordsMu.Unlock()
	for _, co := range e.Coordinators {
		if co.ctl != nil {
			if ctl := co.ctl.Current(); ctl != nil {
				return ctl
			}
		}
	}
	return nil
}

// autoCreate is the view's creator while the controller moves between
// the process's coordinators.
func (e *Embedded) autoCreate(name string) (cluster.Topic, error) {
	if ctl := e.runningController(); ctl != nil {
		return ctl.AutoCreate(name)
	}
	return cluster.Topic{}, errNoController
}

// forwardFrom is the topics.ForwardFunc of node from (-1: a leader): the
// controller's requests go in-process to the node running the controller
// (node 0, or the holder of its lease); never to from itself, which
// answers NOT_CONTROLLER instead (it holds the lease but has not opened
// the controller yet).
func (e *Embedded) forwardFrom(from int32) topics.ForwardFunc {
	return func(ctx context.Context, req *wire.Request) (kmsg.Response, error) {
		to := e.View.Coordinator().NodeID
		if e.Controller == nil {
			id, ok := e.controllerHolder()
			if !ok || id == from {
				return nil, errNoController
			}
			to = id
		}
		c, ok := e.byNode[to]
		if !ok {
			return nil, fmt.Errorf("no coordinator %d in this process: %w", to, errNoController)
		}
		return c.forward(ctx, req)
	}
}

// followController makes the shared view name the controller's holder
// (several coordinators on etcd) in Metadata and DescribeCluster.
func (e *Embedded) followController() {
	if e.Controller != nil {
		return
	}
	e.View.SetController(func() (cluster.Node, bool) {
		id, ok := e.controllerHolder()
		if !ok {
			return cluster.Node{}, false
		}
		return e.View.Node(id)
	})
}
