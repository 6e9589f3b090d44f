package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/txncoord/txncoord/security"
)

// `txncoord acls` against `txncoord up --secure` (ACLs need an
// authorizer, as in Kafka): create (literal and prefixed, allow and deny),
// list with filters (MATCH included), what kadm's DescribeACLs sees,
// refusals with exit 2, delete by filter.
func TestACLsCommands(t *testing.T) {
	base := freePortRun(t, 4)
	dataDir := t.TempDir()
	up := startUpEnv(t, nil, "--secure", "--data-dir", dataDir,
		"--listen", fmt.Sprintf("127.0.0.1:%d", base), "--leaders", "4.2,4.1", "--admin-listen", fmt.Sprintf("127.0.0.1:%d", base+3))
	secDir := filepath.Join(dataDir, "security")
	env := []string{"TXNCOORD_ADMIN_TOKEN=" + readSecret(t, filepath.Join(secDir, "admin.token"))}
	a := []string{"--admin", up.adminURL}
	run := func(wantCode int, args ...string) string {
		t.Helper()
		stdout, stderr, code := runCLIEnv(t, env, append(args, a...)...)
		if code != wantCode {
			t.Fatalf("txncoord %s: exit %d, want %d; stdout %q stderr %q", strings.Join(args, " "), code, wantCode, stdout, stderr)
		}
		if code != 0 {
			return stderr
		}
		return stdout
	}
	run(0, "acls", "create", "--resource-type", "topic", "--resource-name", "orders-", "--pattern-type", "prefixed",
		"--principal", "User:alice", "--operation", "write")
	run(0, "acls", "create", "--resource-type", "topic", "--resource-name", "orders-eu", "--principal", "User:*",
		"--operation", "write", "--permission", "deny")
	run(0, "acls", "create", "--resource-type", "group", "--resource-name", "app", "--principal", "User:alice", "--operation", "read")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--resource-type", "topic", "--resource-name", "x", "--principal", "alice", "--operation", "read"}, "principal"},
		{[]string{"--resource-type", "cluster", "--resource-name", "c", "--principal", "User:a", "--operation", "alter"}, "kafka-cluster"},
		{[]string{"--resource-type", "topic", "--resource-name", "x", "--principal", "User:a", "--operation", "fly"}, "operation"},
		{[]string{"--resource-type", "topic", "--principal", "User:a", "--operation", "read"}, "--resource-name is required"},
	} {
		if out := run(2, append([]string{"acls", "create"}, tc.args...)...); !strings.Contains(out, tc.want) {
			t.Errorf("create %v: %q does not name %q", tc.args, out, tc.want)
		}
	}

	if out := run(0, "acls", "list"); strings.Count(out, "\n") != 4 || !strings.Contains(out, "PREFIXED") || !strings.Contains(out, "DENY") {
		t.Fatalf("list: %q", out)
	}
	if out := run(0, "acls", "list", "--resource-type", "topic", "--resource-name", "orders-eu", "--pattern-type", "match"); strings.Count(out, "\n") != 3 {
		t.Fatalf("list MATCH orders-eu: want the prefixed allow and the literal deny: %q", out)
	}

	// A Kafka admin client (the cluster user, a super user) sees the same
	// ACLs.
	pool := x509.NewCertPool()
	if caPEM, err := os.ReadFile(filepath.Join(secDir, "ca.crt")); err != nil || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("local CA: %v", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap), kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: security.LocalClusterUser, Pass: readSecret(t, filepath.Join(secDir, "cluster.password"))}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	described, err := kadm.NewClient(cl).DescribeACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics().Groups().Operations().ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range described {
		n += len(d.Described)
	}
	if n != 2 {
		t.Fatalf("kadm DescribeACLs for User:alice: %d bindings, want 2: %+v", n, described)
	}

	if out := run(2, "acls", "delete"); !strings.Contains(out, "filter") {
		t.Fatalf("delete without a filter: %q", out)
	}
	if out := run(0, "acls", "delete", "--principal", "User:alice"); strings.Count(out, "\n") != 3 {
		t.Fatalf("delete alice's: %q", out)
	}
	if out := run(0, "acls", "list", "-o", "json"); !strings.Contains(out, `"principal": "User:*"`) || strings.Contains(out, "alice") {
		t.Fatalf("list after delete: %q", out)
	}
}
