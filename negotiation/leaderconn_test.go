package negotiation_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/internal/datadriven"
	"github.com/txncoord/txncoord/negotiation"
	"github.com/txncoord/txncoord/negotiation/testkit"
)

// TestNegotiate replays testdata/negotiate.txt: each case starts a fake
// leader with a Kafka profile, connects a LeaderConn to it and sends
// WriteTxnMarkers with TransactionVersion 2, then prints what was
// negotiated and what the leader decoded. It runs twice, over TCP and over
// the in-process transport `txncoord up` uses for its own leaders, with
// the same expected output: in-process negotiation, version errors and
// restarts behave as on a connection.
func TestNegotiate(t *testing.T) {
	for _, transport := range []string{"tcp", "in-process"} {
		t.Run(transport, func(t *testing.T) { testNegotiate(t, transport == "in-process") })
	}
}

func testNegotiate(t *testing.T, inProcess bool) {
	datadriven.RunFile(t, "testdata/negotiate.txt", func(t *testing.T, c *datadriven.Case) string {
		var out strings.Builder
		start := testkit.StartFakeLeader
		if c.Arg("wtm", "yes") == "no" {
			start = testkit.StartFakeLeaderWithoutMarkers
		}
		leader, err := start(c.Arg("leader", "4.2"))
		if err != nil {
			t.Fatal(err)
		}
		defer leader.Close()
		cfg := negotiation.LeaderConfig{
			NodeID: 1, Addr: leader.Addr(), KafkaVersion: c.Arg("leader", "4.2"),
			CoordinatorVersion: c.Arg("coordinator", "4.2"), Discovery: c.Arg("discovery", "on") == "on",
		}
		if inProcess {
			cfg.Dial = func(context.Context, string) (negotiation.Transport, error) {
				if lc := leader.Local(); lc != nil {
					return lc, nil
				}
				return nil, errors.New("leader not running")
			}
		}
		conn, err := negotiation.NewLeaderConn(cfg)
		if err != nil {
			return "error: " + err.Error()
		}
		defer conn.Close()
		steps := []string{"send"}
		if c.Cmd == "restart" {
			steps = []string{"send", "restart " + c.Arg("to", ""), "send", "send"}
		}
		for _, step := range steps {
			if to, ok := strings.CutPrefix(step, "restart "); ok {
				if err := leader.Restart(to); err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&out, "leader restarted as %s\n", to)
				continue
			}
			before := len(leader.Received())
			err := send(conn)
			st := conn.Status()
			fmt.Fprintf(&out, "advertised v%d-v%d in_use v%d connected=%v\n", st.AdvertisedMin, st.AdvertisedMax, st.InUse, st.Connected)
			if err != nil {
				var se *negotiation.SendError
				switch {
				case errors.Is(err, negotiation.ErrNoCommonVersion):
					fmt.Fprintf(&out, "send failed: %v\n", errors.Unwrap(err))
				case errors.As(err, &se) && se.Version >= 0:
					fmt.Fprintf(&out, "send failed: connection closed after a v%d request\n", se.Version)
				default:
					fmt.Fprintf(&out, "send failed: %v\n", err)
				}
				continue
			}
			for _, r := range leader.Received()[before:] {
				fmt.Fprintf(&out, "leader received v%d tv=%d\n", r.Version, r.Markers[0].TransactionVersion)
			}
		}
		return out.String()
	})
}

func send(conn *negotiation.LeaderConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, m.TransactionVersion = 7, 3, true, 1, 2
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "orders", []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	_, err := conn.WriteTxnMarkers(ctx, req)
	return err
}

func TestChooseVersion(t *testing.T) {
	for _, tc := range []struct {
		coordMax, advMin, advMax int16
		advertised, discovery    bool
		want                     int16
		wantErr                  bool
	}{
		{2, 0, 2, true, true, 2, false},
		{2, 0, 1, true, true, 1, false},
		{1, 0, 2, true, true, 1, false},
		{2, 0, 1, true, false, 2, false}, // Kafka 4.2.0
		{2, 0, 0, false, true, -1, true},
		{1, 2, 2, true, true, -1, true},
	} {
		got, err := negotiation.ChooseVersion(tc.coordMax, tc.advMin, tc.advMax, tc.advertised, tc.discovery)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("ChooseVersion(%+v) = %d, %v", tc, got, err)
		}
	}
}

func TestStatusBeforeConnect(t *testing.T) {
	conn, err := negotiation.NewLeaderConn(negotiation.LeaderConfig{NodeID: 3, Addr: "127.0.0.1:1", KafkaVersion: "4.1", CoordinatorVersion: "4.2", Discovery: true})
	if err != nil {
		t.Fatal(err)
	}
	st := conn.Status()
	if st.InUse != -1 || st.AdvertisedMax != -1 || st.Connected || st.KafkaVersion != "4.1" {
		t.Fatalf("status before connect: %+v", st)
	}
	if _, err := negotiation.NewLeaderConn(negotiation.LeaderConfig{CoordinatorVersion: "9.9"}); err == nil {
		t.Fatal("unknown coordinator version accepted")
	}
}
