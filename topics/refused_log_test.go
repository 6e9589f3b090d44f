package topics_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"

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
	var logs syncBuffer
	_, _, cl := startEmbedded(t, node.EmbeddedSpec{}, func(c *node.EmbeddedConfig) { c.Log = zerolog.New(&logs).Level(zerolog.InfoLevel) })
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
