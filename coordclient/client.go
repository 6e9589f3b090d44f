package coordclient

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client is how a node reaches the transaction coordinator: over the Kafka
// protocol as a real broker does (Dial), through a coordinator's handlers
// in the same process (InProcess), or each transactional id's owner among
// several coordinators (Routed). Tests use in-memory twins.
type Client interface {
	// AddPartitionsToTxn sends a broker-to-coordinator request (v4/v5
	// batched form, VerifyOnly per transaction).
	AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error)
	// InitProducerID forwards an idempotent (null transactional id)
	// InitProducerId.
	InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) (*kmsg.InitProducerIDResponse, error)
	// FindCoordinator sends req in the batched form (CoordinatorKeys),
	// at FindCoordinatorBatchedVersion or above: Routed learns each
	// transactional id's owner with it, and a leader forwards its
	// clients' FindCoordinator through it.
	FindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) (*kmsg.FindCoordinatorResponse, error)
	// Local reports whether a request costs no round trip (the
	// coordinator's handlers run in this process): the Registrar then
	// sends each transaction on its own instead of batching.
	Local() bool
	// Close releases the client's connections; later requests fail.
	Close() error
}

// FindCoordinatorBatchedVersion is the first FindCoordinator version with
// CoordinatorKeys (KIP-699).
const FindCoordinatorBatchedVersion = 4

// addPartitionsBrokerVersion is the first AddPartitionsToTxn version of the
// broker-to-coordinator (batched) form.
const addPartitionsBrokerVersion = 4

// versionsOf is an ApiVersions answer as key → [min, max].
func versionsOf(av *kmsg.ApiVersionsResponse) map[int16][2]int16 {
	m := make(map[int16][2]int16, len(av.ApiKeys))
	for _, k := range av.ApiKeys {
		m[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return m
}

// answer is a response of the type its request asked for, or the error.
func answer[R kmsg.Response](resp kmsg.Response, err error) (R, error) {
	if err != nil {
		var none R
		return none, err
	}
	return resp.(R), nil
}
