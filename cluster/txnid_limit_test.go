package cluster

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A transactional id longer than Kafka can store (32767 bytes, an int16
// string length) is answered INVALID_REQUEST; one at the limit is served.
func TestFindCoordinatorTransactionalIDLimit(t *testing.T) {
	v := NewView(testFile(t, "4.2"))
	atLimit := strings.Repeat("x", MaxTransactionalIDBytes)
	tooLong := atLimit + "x"
	for _, version := range []int16{1, 3} {
		for key, want := range map[string]int16{atLimit: 0, tooLong: kerr.InvalidRequest.Code} {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.SetVersion(version)
			req.CoordinatorType, req.CoordinatorKey = 1, key
			if got := v.FindCoordinator(req).ErrorCode; got != want {
				t.Errorf("v%d, %d-byte key: error %d, want %d", version, len(key), got, want)
			}
		}
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(4)
	req.CoordinatorType, req.CoordinatorKeys = 1, []string{"short", tooLong}
	resp := v.FindCoordinator(req)
	if len(resp.Coordinators) != 2 || resp.Coordinators[0].ErrorCode != 0 || resp.Coordinators[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("v4 batch: %+v, want the short key served and the long one INVALID_REQUEST", resp.Coordinators)
	}
}
