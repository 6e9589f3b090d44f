package node

import (
	"context"
	"sync/atomic"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordclient"
	"github.com/txncoord/txncoord/wire"
)

// dialCoordinators is how a node of its own process reaches the
// transaction coordinators over TCP: the one coordinator, or, with
// several, each transactional id's owner (coordclient.Routed, which learns
// the owners with FindCoordinator and follows them as they move).
func dialCoordinators(v *cluster.View, dial wire.DialConfig, log zerolog.Logger) coordclient.Client {
	nodes := v.Coordinators()
	if len(nodes) == 1 {
		return coordclient.DialWith(nodes[0].Addr, dial, log)
	}
	clients := map[int32]coordclient.Client{}
	for _, n := range nodes {
		clients[n.NodeID] = coordclient.DialWith(n.Addr, dial, log)
	}
	return coordclient.NewRouted(coordclient.RoutedConfig{Coordinators: clients, Partitions: v.TransactionStatePartitions(), Log: log})
}

// txnCoordinatorsClient is how a coordinator node's group coordinator
// (TxnOffsetCommit's AddPartitionsToTxn) or partitions reach the
// transaction coordinator of an id, as clientID: its own server in-process
// once it listens, the others as the config gives them (`txncoord up`:
// in-process) or over TCP, each id routed to its owner.
func txnCoordinatorsClient(cfg CoordinatorConfig, self cluster.Node, ownServer *atomic.Pointer[wire.Server], dial wire.DialConfig, log zerolog.Logger, clientID string) coordclient.Client {
	own := coordclient.InProcess(func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
		srv := ownServer.Load()
		if srv == nil {
			return nil, errCoordinatorNotStarted
		}
		return srv.Local(clusterPrincipal(cfg.View)).WithClientID(clientID).Inline().Do(ctx, req)
	})
	nodes := cfg.View.Coordinators()
	if len(nodes) == 1 {
		return own
	}
	clients := map[int32]coordclient.Client{}
	for _, n := range nodes {
		switch cl, ok := cfg.TxnCoordinators[n.NodeID]; {
		case n.NodeID == self.NodeID:
			clients[n.NodeID] = own
		case ok:
			clients[n.NodeID] = cl
		default:
			clients[n.NodeID] = coordclient.DialWith(n.Addr, dial, log)
		}
	}
	return coordclient.NewRouted(coordclient.RoutedConfig{Coordinators: clients, Partitions: cfg.View.TransactionStatePartitions(), Log: log})
}
