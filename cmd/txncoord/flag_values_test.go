package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBadServerFlagValues: values that used to be replaced silently (a
// lease of 500ms became 1 s, 0s the 5 s default; --retention-bytes -5 and
// --producer-id-expiration 0s their defaults), or refused with a message
// about something else (--listen 127.0.0.1:abc, leader --kafka-version 9.9
// exited 1), exit 2 with one line naming the flag, before anything is
// written.
func TestBadServerFlagValues(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"up", "--etcd-lease-ttl", "500ms"}, "--etcd-lease-ttl 500ms"},
		{[]string{"up", "--etcd-lease-ttl", "0s"}, "--etcd-lease-ttl 0s"},
		{[]string{"up", "--etcd-lease-ttl", "-1s"}, "--etcd-lease-ttl -1s"},
		{[]string{"coordinator", "--cluster", "x.yaml", "--etcd-lease-ttl", "1500ms"}, "--etcd-lease-ttl 1.5s"},
		{[]string{"up", "--retention-bytes", "-5"}, "--retention-bytes -5"},
		{[]string{"leader", "--cluster", "x.yaml", "--node-id", "1", "--retention-bytes", "0"}, "--retention-bytes 0"},
		{[]string{"coordinator", "--cluster", "x.yaml", "--retention-bytes", "0"}, "--retention-bytes 0"},
		{[]string{"coordinator", "--cluster", "x.yaml", "--producer-id-expiration", "0s"}, "--producer-id-expiration 0s"},
		{[]string{"up", "--producer-id-expiration", "0s"}, "--producer-id-expiration 0s"},
		{[]string{"leader", "--cluster", "x.yaml", "--node-id", "1", "--producer-id-expiration", "-1h"}, "--producer-id-expiration -1h"},
		{[]string{"leader", "--cluster", "x.yaml", "--node-id", "1", "--kafka-version", "9.9"}, "--kafka-version"},
		{[]string{"up", "--listen", "127.0.0.1:abc"}, `--listen "127.0.0.1:abc"`},
		{[]string{"up", "--listen", "nohost"}, `--listen "nohost"`},
		{[]string{"up", "--log-cleanup-policy", "shred"}, `--log-cleanup-policy "shred": Invalid value shred for configuration log.cleanup.policy`},
		{[]string{"up", "--log-cleaner-delete-retention-ms", "-1"}, "Value must be at least 0"},
		{[]string{"up", "--log-cleaner-min-compaction-lag-ms", "soon"}, "log.cleaner.min.compaction.lag.ms: Not a number of type LONG"},
		{[]string{"up", "--log-cleaner-max-compaction-lag-ms", "0"}, "Value must be at least 1"},
		{[]string{"up", "--log-cleaner-min-cleanable-ratio", "1.5"}, "Value must be no more than 1"},
		{[]string{"up", "--log-cleaner-min-compaction-lag-ms", "10", "--log-cleaner-max-compaction-lag-ms", "5"}, "--log-cleaner-min-compaction-lag-ms 10 is above"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			data := filepath.Join(dir, "data")
			stdout, stderr, code := runCLI(t, append(tc.args, "--data-dir", data)...)
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q: want exit 2 and one line naming %q", code, stdout, stderr, tc.want)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("the data dir was created (%v)", err)
			}
		})
	}
}

// TestVersionCommand: `txncoord version` names the version, the commit
// the binary was built from (-ldflags, as make build stamps them) and the
// Go version, and -o json gives the same as one object.
func TestVersionCommand(t *testing.T) {
	oldVersion, oldCommit := version, commit
	version, commit = "v1.2.3", "0123456789abcdef0123456789abcdef01234567"
	defer func() { version, commit = oldVersion, oldCommit }()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"txncoord", "version", "-o", "json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("version -o json: exit %d, %s", code, stderr.String())
	}
	var v struct {
		Version   string `json:"version"`
		Module    string `json:"module"`
		Commit    string `json:"commit"`
		GoVersion string `json:"go_version"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
		t.Fatalf("version -o json: %v: %q", err, stdout.String())
	}
	if v.Version != version || v.Commit != commit || v.GoVersion != runtime.Version() || v.Module != "github.com/txncoord/txncoord" {
		t.Errorf("version -o json: %+v; want %s, commit %s, %s", v, version, commit, runtime.Version())
	}
	stdout.Reset()
	if code := run([]string{"txncoord", "version"}, &stdout, &stderr); code != 0 ||
		stdout.String() != fmt.Sprintf("txncoord v1.2.3\ncommit %s\n%s %s/%s\n", commit, runtime.Version(), runtime.GOOS, runtime.GOARCH) {
		t.Errorf("version: exit %d, %q", code, stdout.String())
	}
}

// TestUpPortInUseWritesNothing: an admin port in use is found before
// anything starts: exit 1 naming the address, and the data dir is not
// created (it used to be found after the whole cluster had started,
// leaving LOCK, txncoord.db and wal/ behind).
func TestUpPortInUseWritesNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	base := freePortRun(t, 2)
	data := filepath.Join(t.TempDir(), "data")
	stdout, stderr, code := runCLI(t, "up", "--data-dir", data, "--listen", fmt.Sprintf("127.0.0.1:%d", base), "--leaders", "4.2",
		"--admin-listen", busy.Addr().String())
	if code != 1 || stdout != "" || !strings.Contains(stderr, busy.Addr().String()) || !strings.Contains(stderr, "address already in use") {
		t.Errorf("exit %d, stdout %q, stderr %q: want exit 1 naming %s in use", code, stdout, stderr, busy.Addr())
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("the data dir was created (%v)", err)
	}
}
