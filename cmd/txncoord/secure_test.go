package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func readSecret(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestSecureUp runs `txncoord up --secure` and drives it with kgo over TLS
// and SASL: transactions commit and abort for an authenticated client, a
// wrong password is refused, a non-cluster principal cannot write markers
// or register partitions (31, nothing changes), and the admin API needs its
// token.
func TestSecureUp(t *testing.T) {
	base := freePortRun(t, 4)
	dataDir := t.TempDir()
	up := startUp(t, "--secure", "--data-dir", dataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", base),
		"--leaders", "4.2,4.1", "--topics", "orders:4", "--admin-listen", fmt.Sprintf("127.0.0.1:%d", base+3))
	secDir := filepath.Join(dataDir, "security")
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(filepath.Join(secDir, "ca.crt"))
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("local CA: %v", err)
	}
	tlsCfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	password := readSecret(t, filepath.Join(secDir, "client.password"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	client := func(mech sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(up.bootstrap), kgo.DialTLSConfig(tlsCfg.Clone()), kgo.SASL(mech)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	scram512 := scram.Auth{User: "client", Pass: password}.AsSha512Mechanism()

	// Transactions over TLS + SCRAM-SHA-512 and over PLAIN.
	for i, mech := range []sasl.Mechanism{scram512, plain.Auth{User: "client", Pass: password}.AsMechanism(), scram.Auth{User: "client", Pass: password}.AsSha256Mechanism()} {
		cl := client(mech, kgo.TransactionalID(fmt.Sprintf("secure-app-%d", i)), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for _, commit := range []bool{true, false} {
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			value := fmt.Sprintf("%s-%v", mech.Name(), commit)
			for p := int32(0); p < 4; p++ {
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: p, Value: []byte(value)}).FirstErr(); err != nil {
					t.Fatalf("%s: produce: %v", mech.Name(), err)
				}
			}
			if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatalf("%s: end txn: %v", mech.Name(), err)
			}
		}
	}

	// A wrong password is refused.
	bad, err := kgo.NewClient(kgo.SeedBrokers(up.bootstrap), kgo.DialTLSConfig(tlsCfg.Clone()),
		kgo.SASL(scram.Auth{User: "client", Pass: "wrong"}.AsSha512Mechanism()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, bad)
	bad.Close()
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	// The client principal may not write markers: 31 per partition, and
	// the open transaction of another producer is untouched.
	owner := client(scram512, kgo.TransactionalID("victim"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := owner.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := owner.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("victim-open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := owner.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	attacker := client(scram512)
	leader0 := leaderOf(t, ctx, attacker, "orders", 0)
	wtm := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, m.TransactionVersion = pid, epoch+1, true, 1000, 2
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "orders", []int32{0}
	m.Topics = append(m.Topics, mt)
	wtm.Markers = append(wtm.Markers, m)
	wresp, err := wtm.RequestWith(ctx, attacker.Broker(int(leader0)))
	if err != nil {
		t.Fatal(err)
	}
	if code := wresp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("WriteTxnMarkers from the client principal: code %d, want 31", code)
	}
	apt := kmsg.NewPtrAddPartitionsToTxnRequest()
	apt.Version = 4
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch = "victim", pid, epoch
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = "orders", []int32{3}
	tx.Topics = append(tx.Topics, tt)
	apt.Transactions = append(apt.Transactions, tx)
	aresp, err := apt.RequestWith(ctx, attacker.Broker(0))
	if err != nil {
		t.Fatal(err)
	}
	if aresp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("AddPartitionsToTxn v4 from the client principal: code %d, want 31", aresp.ErrorCode)
	}
	adm := kadm.NewClient(attacker)
	described, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"orders": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, d := range described.SortedProducers() {
		if d.ProducerID == pid {
			found = true
			if d.ProducerEpoch != epoch || d.CurrentTxnStartOffset < 0 {
				t.Fatalf("the rejected marker changed the producer's state: %+v", d)
			}
		}
	}
	if !found {
		t.Fatalf("no producer state for pid %d", pid)
	}
	if err := owner.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	// read_committed sees every committed value and none of the aborted
	// ones or the victim's.
	reader := client(scram512, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	want := map[string]bool{"SCRAM-SHA-512-true": true, "PLAIN-true": true, "SCRAM-SHA-256-true": true}
	for len(want) > 0 {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("still waiting for %v", want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if strings.HasSuffix(v, "-false") || v == "victim-open" {
				t.Fatalf("read_committed saw %s", v)
			}
			delete(want, v)
		})
	}

	// The admin API needs the token; /metrics stays open.
	for path, wantCode := range map[string]int{"/v1/transactions": 401, "/metrics": 200} {
		resp, err := http.Get(up.adminURL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != wantCode {
			t.Fatalf("GET %s without token: %d, want %d", path, resp.StatusCode, wantCode)
		}
	}
	token := readSecret(t, filepath.Join(secDir, "admin.token"))
	if _, stderr, code := runCLI(t, "txn", "list", "--admin", up.adminURL); code != 1 || !strings.Contains(stderr, "401") {
		t.Fatalf("txn list without token: exit %d: %s", code, stderr)
	}
	if stdout, stderr, code := runCLI(t, "txn", "list", "--admin", up.adminURL, "--token", token); code != 0 || !strings.Contains(stdout, "secure-app-0") {
		t.Fatalf("txn list with token: exit %d: %s %s", code, stdout, stderr)
	}

	// The commands that read the leaders directly connect over TLS + SASL.
	kafkaFlags := []string{"--admin", up.adminURL, "--token", token, "-o", "json",
		"--tls-ca", filepath.Join(secDir, "ca.crt"), "--sasl-user", "client", "--sasl-password-file", filepath.Join(secDir, "client.password")}
	var producers []map[string]any
	cliJSON(t, &producers, append([]string{"producers", "--topic", "orders", "--partition", "0"}, kafkaFlags...)...)
	found = false
	for _, p := range producers {
		found = found || int64(p["producer_id"].(float64)) == pid
	}
	if !found {
		t.Fatalf("producers over TLS + SASL: %+v lacks pid %d", producers, pid)
	}
	var hanging []map[string]any
	cliJSON(t, &hanging, append([]string{"txn", "find-hanging", "--topic", "orders", "--max-transaction-timeout", "0s"}, kafkaFlags...)...)
	if len(hanging) != 0 {
		t.Fatalf("find-hanging over TLS + SASL: %+v", hanging)
	}
	up.stop(t)

	// up --secure says where the password is, never the password itself;
	// the file is readable by its owner only.
	said := up.stderr.String() // the process has exited: no more writes
	if !strings.Contains(said, filepath.Join(secDir, "client.password")) {
		t.Errorf("up --secure does not name the client password file:\n%s", said)
	}
	if strings.Contains(said, password) || strings.Contains(said, token) {
		t.Errorf("up --secure printed a secret:\n%s", said)
	}
	if st, err := os.Stat(filepath.Join(secDir, "client.password")); err != nil {
		t.Error(err)
	} else if st.Mode().Perm() != 0o600 {
		t.Errorf("client.password mode %v, want 0600", st.Mode().Perm())
	}
}

func leaderOf(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partition int32) int32 {
	t.Helper()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := md.Topics[topic].Partitions[partition]
	if !ok {
		t.Fatalf("no metadata for %s-%d", topic, partition)
	}
	return p.Leader
}
