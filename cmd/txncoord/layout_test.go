package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDataDirLayoutGuard: the data dir keeps its layout (meta.properties);
// `up` with another one (fewer leaders, more coordinators) exits 2 with one
// line naming both layouts and what to do, and writes nothing; the same
// layout with other leader versions (a rolling upgrade) starts and finds
// the data. A data dir without meta.properties (an older release's) is
// judged by its cluster.yaml.
func TestDataDirLayoutGuard(t *testing.T) {
	base := freePortRun(t, 6)
	dir := t.TempDir()
	listen := fmt.Sprintf("127.0.0.1:%d", base)
	common := []string{"--data-dir", dir, "--listen", listen, "--admin-listen", "", "--topics", "kept:2"}
	up := startUp(t, append(common, "--leaders", "4.2,4.2")...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kept", Partition: 1, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	up.stop(t)
	meta, err := os.ReadFile(filepath.Join(dir, "meta.properties"))
	if err != nil {
		t.Fatalf("no meta.properties after a start: %v", err)
	}
	if !strings.Contains(string(meta), "nodes=0:coordinator,1:leader,2:leader\n") {
		t.Errorf("meta.properties:\n%s", meta)
	}
	clusterYAML, _ := os.ReadFile(filepath.Join(dir, "cluster.yaml"))

	refused := func(t *testing.T, wantNew string, args ...string) {
		t.Helper()
		stdout, stderr, code := runCLI(t, append(append([]string{"up"}, common...), args...)...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Fatalf("exit %d, stdout %q, stderr %q: want exit 2 and one line", code, stdout, stderr)
		}
		for _, want := range []string{"nodes 0:coordinator,1:leader,2:leader (1 coordinator(s), 2 leader(s))", wantNew, "--data-dir", "--force-new-cluster"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr does not name %q: %s", want, stderr)
			}
		}
		if now, _ := os.ReadFile(filepath.Join(dir, "cluster.yaml")); !bytes.Equal(now, clusterYAML) {
			t.Errorf("a refused start rewrote cluster.yaml:\n%s", now)
		}
	}
	t.Run("fewer leaders", func(t *testing.T) {
		refused(t, "nodes 0:coordinator,1:leader (1 coordinator(s), 1 leader(s))", "--leaders", "4.2")
	})
	t.Run("more coordinators", func(t *testing.T) {
		refused(t, "nodes 0:coordinator,1:coordinator,2:coordinator,3:leader,4:leader", "--leaders", "4.2,4.2", "--coordinators", "3")
	})
	t.Run("an older data dir, judged by its cluster.yaml", func(t *testing.T) {
		if err := os.Rename(filepath.Join(dir, "meta.properties"), filepath.Join(dir, "meta.properties.aside")); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(filepath.Join(dir, "meta.properties.aside"), filepath.Join(dir, "meta.properties"))
		refused(t, "nodes 0:coordinator,1:leader (1 coordinator(s), 1 leader(s))", "--leaders", "4.2")
	})
	t.Run("same layout, other versions", func(t *testing.T) {
		up := startUp(t, append(common, "--leaders", "4.1,4.2")...)
		defer up.stop(t)
		cl, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kept": {1: kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		fs := cl.PollFetches(ctx)
		if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "v" {
			t.Errorf("after a restart with the same layout: %d records, errors %v", len(recs), fs.Errors())
		}
	})
}
