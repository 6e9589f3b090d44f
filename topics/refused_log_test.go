package topics_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txncoord/txncoord/node"
)

// syncBuffer is a log sink the server's goroutines write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines(substr string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// TestRefusedCreateTopicsLogged: a refused CreateTopics is logged at info
// level with the topic and the reason, once per connection: the same
// refusal again on the connection is not (at info), and an existing topic
// (how clients create idempotently) is not a refusal.
func TestRefusedCreateTopicsLogged(t *testing.T) {
	lns := map[int32]net.Listener{}
	for i := int32(0); i < 2; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
	}
	spec := node.EmbeddedSpec{Listen: lns[0].Addr().String(), CoordinatorVersion: "4.2", LeaderVersions: []string{"4.2"}, DefaultPartitions: 1}
	f, err := spec.ClusterFile()
	if err != nil {
		t.Fatal(err)
	}
	f.Leaders[0].Addr = lns[1].Addr().String()
	var logs syncBuffer
	e, err := node.StartEmbedded(node.EmbeddedConfig{File: f, DataDir: t.TempDir(), Listeners: lns,
		Log: zerolog.New(&logs).Level(zerolog.InfoLevel)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.Coordinator.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "fine"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "fine"); err == nil {
		t.Fatal("creating fine twice: no TOPIC_ALREADY_EXISTS")
	}
	bad := map[string]*string{"cleanup.policy": kadm.StringPtr("remove")}
	for range 2 {
		if _, err := adm.CreateTopic(ctx, 1, 1, bad, "refused"); err == nil {
			t.Fatal("cleanup.policy=remove accepted")
		}
	}
	got := logs.lines(`"message":"request refused"`)
	if len(got) != 1 {
		t.Fatalf("%d info lines for the refusals, want 1:\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, want := range []string{`"level":"info"`, `"resource":"refused"`, `"error":"INVALID_CONFIG`,
		`Invalid value remove for configuration cleanup.policy`} {
		if !strings.Contains(got[0], want) {
			t.Fatalf("refusal line %s lacks %s", got[0], want)
		}
	}
}
