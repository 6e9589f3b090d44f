package admin

import (
	"cmp"
	"context"
	"net/http"
	"slices"
)

// The coordinators of the cluster in the admin API: GET /v1/coordinators,
// and `txncoord coordinators`. With several coordinators
// sharing the __transaction_state partitions through etcd leases, every
// coordinator's admin API answers for the whole cluster: each coordinator,
// whether it holds a lease, the partitions it owns with their coordinator
// epochs. The node serves it when its Backend also implements
// CoordinatorsBackend; otherwise it answers 404 saying so.

// CoordinatorStatus is one coordinator node as GET /v1/coordinators shows it.
type CoordinatorStatus struct {
	NodeID       int32  `json:"node_id"`
	Addr         string `json:"addr"`
	KafkaVersion string `json:"kafka_version"`
	// Live: the node holds a lease in etcd (always true for the
	// single-coordinator mode's one node while it answers).
	Live bool `json:"live"`
	// Self marks the coordinator whose admin API answered.
	Self bool `json:"self"`
	// Partitions are the __transaction_state partitions it owns,
	// ascending, with their coordinator epochs.
	Partitions []PartitionOwnership `json:"partitions"`
	// Serving is how many of them it has loaded and serves (known only
	// for Self; -1 for others).
	Serving int `json:"serving"`
}

// PartitionOwnership is one owned __transaction_state partition and the
// coordinator epoch its owner holds it with.
type PartitionOwnership struct {
	Partition int32 `json:"partition"`
	Epoch     int32 `json:"epoch"`
}

// CoordinatorsBackend is implemented by a Backend that knows the cluster's
// coordinators. Any error it returns answers 500.
type CoordinatorsBackend interface {
	Coordinators(ctx context.Context) ([]CoordinatorStatus, error)
}

// errNoCoordinators answers GET /v1/coordinators on a node whose Backend
// does not report them.
var errNoCoordinators = errorString("this coordinator does not report coordinators")

// coordinatorRoutes adds GET /v1/coordinators to mux.
func coordinatorRoutes(mux *http.ServeMux, b Backend) {
	cb, ok := b.(CoordinatorsBackend)
	mux.HandleFunc("GET /v1/coordinators", servedIf(ok, errNoCoordinators)(func(w http.ResponseWriter, r *http.Request) {
		cs, err := cb.Coordinators(r.Context())
		if err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		writeJSON(w, http.StatusOK, orderedCoordinators(cs))
	}))
}

// orderedCoordinators is the answer's shape whatever the backend built:
// coordinators by node id, each one's partitions ascending and never null
// (a coordinator that owns nothing shows [], which a client can tell from
// a field that is missing). It works on a copy: the backend's slices may
// be its own state.
func orderedCoordinators(cs []CoordinatorStatus) []CoordinatorStatus {
	out := make([]CoordinatorStatus, len(cs))
	for i, c := range cs {
		c.Partitions = append([]PartitionOwnership{}, c.Partitions...)
		slices.SortFunc(c.Partitions, func(a, b PartitionOwnership) int { return cmp.Compare(a.Partition, b.Partition) })
		out[i] = c
	}
	slices.SortStableFunc(out, func(a, b CoordinatorStatus) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return out
}
