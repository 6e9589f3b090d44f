package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/integration/checker"
)

// unreachable is a Config whose clients never connect (nothing listens on
// port 1), so every transaction fails at client init.
func unreachable(id string) Config {
	return Config{
		Bootstrap:       []string{"127.0.0.1:1"},
		TransactionalID: id,
		Partitions:      []checker.Partition{{Topic: "t", Partition: 0}},
		OpTimeout:       2 * time.Second,
	}
}

// TestSaramaChildErrorAndLog: the child's error text and log lines (at
// their level, with their fields) reach the caller.
func TestSaramaChildErrorAndLog(t *testing.T) {
	var logs bytes.Buffer
	cfg := unreachable("child-error")
	cfg.MaxFailures = 2
	cfg.Log = zerolog.New(&logs)
	_, err := saramaChild(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "2 transactions failed in a row") {
		t.Fatalf("err = %v, want the driver's give-up error", err)
	}
	for _, want := range []string{`"level":"warn"`, `"client":"sarama"`, `"txn_id":"child-error"`, `"message":"client init failed"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
}

// TestSaramaWorkerStopsOnEOF: a child whose parent has gone (its stdin at
// EOF) stops and still answers, so none outlives a killed test binary.
func TestSaramaWorkerStopsOnEOF(t *testing.T) {
	bin, err := saramaWorkerBinary()
	if err != nil {
		t.Fatal(err)
	}
	cfg := unreachable("child-eof")
	cfg.MaxFailures = 1 << 20
	in, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Stdin = bytes.NewReader(in) // EOF right after the config
	done := make(chan struct{})
	time.AfterFunc(30*time.Second, func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
		}
	})
	out, err := cmd.Output()
	close(done)
	if err != nil {
		t.Fatalf("saramaworker: %v", err)
	}
	var res saramaResult
	if err := json.Unmarshal(out, &res); err != nil || res.Err != "" {
		t.Fatalf("result %q: %v", out, err)
	}
}
