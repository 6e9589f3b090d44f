package coordclient

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// InProcess returns a Client over do, a function that sends a request to
// the coordinator at the version it negotiates itself (wire.LocalClient.Do:
// a coordinator's handlers in the same process). Like Dial it learns the
// coordinator's versions with an ApiVersions sent through do (again after
// any error, as a reconnect renegotiates) and refuses, without sending it,
// a request the coordinator cannot take at the version its form needs
// (AddPartitionsToTxn v4+, FindCoordinator v4+). Errors from do reach the
// caller as a dial error would: retriable.
func InProcess(do func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)) Client {
	return &inProcess{do: do}
}

type inProcess struct {
	do       func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	versions atomic.Pointer[map[int16][2]int16] // nil until ApiVersions answered
}

// Local is true: a request is a call into the coordinator's handlers.
func (f *inProcess) Local() bool { return true }

// Close has nothing to release.
func (f *inProcess) Close() error { return nil }

func (f *inProcess) AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	return answer[*kmsg.AddPartitionsToTxnResponse](f.send(ctx, req, addPartitionsBrokerVersion))
}

func (f *inProcess) InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) (*kmsg.InitProducerIDResponse, error) {
	return answer[*kmsg.InitProducerIDResponse](f.send(ctx, req, 0))
}

func (f *inProcess) FindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) (*kmsg.FindCoordinatorResponse, error) {
	return answer[*kmsg.FindCoordinatorResponse](f.send(ctx, req, FindCoordinatorBatchedVersion))
}

func (f *inProcess) send(ctx context.Context, req kmsg.Request, minVersion int16) (kmsg.Response, error) {
	versions := f.versions.Load()
	if versions == nil {
		raw, err := f.do(ctx, kmsg.NewPtrApiVersionsRequest())
		if err != nil {
			return nil, fmt.Errorf("coordclient: coordinator ApiVersions: %w", err)
		}
		av, ok := raw.(*kmsg.ApiVersionsResponse)
		if !ok || av.ErrorCode != 0 {
			return nil, fmt.Errorf("coordclient: coordinator ApiVersions: unexpected answer %v", raw)
		}
		m := versionsOf(av)
		versions = &m
		f.versions.Store(versions)
	}
	rng, ok := (*versions)[req.Key()]
	if !ok || min(req.MaxVersion(), rng[1]) < max(rng[0], minVersion) {
		return nil, unsupported(req, minVersion)
	}
	resp, err := f.do(ctx, req)
	if err != nil {
		f.versions.CompareAndSwap(versions, nil)
		return nil, err
	}
	if resp == nil || resp.Key() != req.Key() || req.GetVersion() < minVersion {
		return nil, fmt.Errorf("coordclient: coordinator answered %s v%d with %v", kmsg.NameForKey(req.Key()), req.GetVersion(), resp)
	}
	return resp, nil
}
