package wire_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"

	"github.com/txncoord/txncoord/security"
	"github.com/txncoord/txncoord/wire"
)

// Real kgo clients authenticate with each mechanism over TLS; handlers see
// the SASL principal; the client user's WriteTxnMarkers gets 31 on every
// partition without reaching the handler, the cluster user's passes.
func TestSASLMechanismsWithKgo(t *testing.T) {
	n := startSecure(t, nil)
	for _, mech := range []string{wire.MechanismPlain, wire.MechanismSCRAMSHA256, wire.MechanismSCRAMSHA512} {
		t.Run(mech, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
			defer cancel()
			client := kgoClient(t, n.addr(), kgo.DialTLSConfig(n.clientTLS(t, false)),
				kgo.SASL(mechanism(mech, n.local.ClientUser, n.local.ClientPassword)))
			pidReq := kmsg.NewPtrInitProducerIDRequest()
			if _, err := pidReq.RequestWith(ctx, client); err != nil {
				t.Fatalf("InitProducerId as %s: %v", mech, err)
			}
			if _, pid := n.calls.snapshot(); len(pid) == 0 || pid[len(pid)-1] != "User:client" {
				t.Fatalf("handler saw principals %v, want User:client last", pid)
			}
			before, _ := n.calls.snapshot()
			resp, err := client.Broker(0).Request(ctx, wtmRequest())
			if err != nil {
				t.Fatal(err)
			}
			if got := wtmCodes(resp.(*kmsg.WriteTxnMarkersResponse)); got[0] != 31 || got[1] != 31 || len(got) != 2 {
				t.Fatalf("client user's WriteTxnMarkers: codes %v, want 31 on both partitions", got)
			}
			if after, _ := n.calls.snapshot(); len(after) != len(before) {
				t.Fatalf("denied WriteTxnMarkers reached the handler: %v", after)
			}

			cluster := kgoClient(t, n.addr(), kgo.DialTLSConfig(n.clientTLS(t, false)),
				kgo.SASL(mechanism(mech, security.LocalClusterUser, mustSecret(t, n.local.ClusterPasswordFile))))
			resp, err = cluster.Broker(0).Request(ctx, wtmRequest())
			if err != nil {
				t.Fatal(err)
			}
			if got := wtmCodes(resp.(*kmsg.WriteTxnMarkersResponse)); got[0] != 0 || got[1] != 0 {
				t.Fatalf("cluster user's WriteTxnMarkers: codes %v, want 0", got)
			}
			if after, _ := n.calls.snapshot(); len(after) != len(before)+1 || after[len(after)-1] != "User:"+security.LocalClusterUser {
				t.Fatalf("handler calls %v, want one more by the cluster principal", after)
			}
		})
	}
}

// A wrong password: kgo gets SASL_AUTHENTICATION_FAILED; on the wire the
// answer is 58 with Kafka's message and the server closes the connection.
func TestSASLWrongPassword(t *testing.T) {
	n := startSecure(t, func(s *security.Settings) { s.TLS = nil })
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	for _, mech := range []string{wire.MechanismPlain, wire.MechanismSCRAMSHA512} {
		client := kgoClient(t, n.addr(), kgo.SASL(mechanism(mech, n.local.ClientUser, "wrong")), kgo.RequestRetries(0))
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, client)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("%s with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", mech, err)
		}
	}

	c := dialRaw(t, n.addr())
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = wire.MechanismPlain
	if resp := c.roundTrip(hs, 1).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 || !slices.Contains(resp.SupportedMechanisms, "SCRAM-SHA-512") {
		t.Fatalf("SaslHandshake: %+v", resp)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(2)
	auth.SASLAuthBytes = []byte("\x00client\x00wrong")
	resp := c.roundTrip(auth, 2).(*kmsg.SASLAuthenticateResponse)
	if resp.ErrorCode != 58 || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "Invalid username or password") {
		t.Fatalf("SaslAuthenticate with a wrong password: code %d message %v", resp.ErrorCode, resp.ErrorMessage)
	}
	c.expectClosed()
	n.logs.waitLog(t, map[string]any{"message": "connection closed: SASL authentication failed", "user": "client", "remote": c.local()})
}

// Before authentication only ApiVersions and the SASL exchange are
// served: ApiVersions advertises 17 and 36; Metadata closes the connection.
func TestUnauthenticatedRequestClosesConnection(t *testing.T) {
	n := startSecure(t, func(s *security.Settings) { s.TLS = nil })
	c := dialRaw(t, n.addr())
	av := c.roundTrip(apiVersionsReq(3), 1).(*kmsg.ApiVersionsResponse)
	ranges := map[int16][2]int16{}
	for _, k := range av.ApiKeys {
		ranges[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if ranges[17] != [2]int16{0, 1} || ranges[36] != [2]int16{0, 2} {
		t.Fatalf("ApiVersions advertises 17=%v 36=%v, want [0 1] and [0 2]", ranges[17], ranges[36])
	}
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(9)
	c.write(frameOf(md, 2))
	c.expectClosed()
	n.logs.waitLog(t, map[string]any{"message": "connection closed: request before SASL authentication", "api_key": float64(3), "remote": c.local()})
	if _, pid := n.calls.snapshot(); len(pid) != 0 {
		t.Fatalf("handlers ran before authentication: %v", pid)
	}

	// A frame above the pre-authentication limit is refused unread.
	big := dialRaw(t, n.addr())
	big.write([]byte{0, 0x10, 0, 0}) // 1 MiB claimed
	big.expectClosed()

	// An unknown mechanism: 33, then closed.
	u := dialRaw(t, n.addr())
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "GSSAPI"
	if resp := u.roundTrip(hs, 1).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 33 || len(resp.SupportedMechanisms) != 3 {
		t.Fatalf("GSSAPI handshake: %+v", resp)
	}
	u.expectClosed()
}

// SaslHandshake v0 is followed by raw SASL tokens (no Kafka header); after
// a raw PLAIN token the connection serves requests as that principal. A
// bad raw token closes the connection.
func TestSASLRawTokensAfterHandshakeV0(t *testing.T) {
	n := startSecure(t, func(s *security.Settings) { s.TLS = nil })
	for _, tc := range []struct {
		pass string
		ok   bool
	}{{n.local.ClientPassword, true}, {"wrong", false}} {
		c := dialRaw(t, n.addr())
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(0)
		hs.Mechanism = wire.MechanismPlain
		if resp := c.roundTrip(hs, 1).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
			t.Fatalf("SaslHandshake v0: %+v", resp)
		}
		token := []byte("\x00client\x00" + tc.pass)
		c.write(append([]byte{0, 0, 0, byte(len(token))}, token...))
		if !tc.ok {
			c.expectClosed()
			continue
		}
		if frame, err := c.readFrame(); err != nil || len(frame) != 0 {
			t.Fatalf("raw PLAIN answer: %q, %v; want an empty token", frame, err)
		}
		pid := kmsg.NewPtrInitProducerIDRequest()
		pid.SetVersion(4)
		if resp := c.roundTrip(pid, 2).(*kmsg.InitProducerIDResponse); resp.ProducerID != 7 {
			t.Fatalf("InitProducerId after raw SASL: %+v", resp)
		}
	}
	if _, pid := n.calls.snapshot(); len(pid) != 1 || pid[0] != "User:client" {
		t.Fatalf("principals %v, want [User:client]", pid)
	}
}

// TLS without SASL: a verified client certificate names the principal
// User:<CN>; without one the principal is anonymous; with client
// certificates required, a client without one cannot connect; plaintext
// to a TLS listener fails.
func TestTLSClientCertificates(t *testing.T) {
	n := startSecure(t, func(s *security.Settings) { s.SASL = nil })
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	for _, withCert := range []bool{false, true} {
		client := kgoClient(t, n.addr(), kgo.DialTLSConfig(n.clientTLS(t, withCert)))
		if _, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, client); err != nil {
			t.Fatalf("InitProducerId over TLS (client cert %v): %v", withCert, err)
		}
	}
	if _, pid := n.calls.snapshot(); !slices.Equal(pid, []string{wire.AnonymousPrincipal, "User:client"}) {
		t.Fatalf("principals %v, want [User:ANONYMOUS User:client]", pid)
	}
	plain := dialRaw(t, n.addr())
	plain.write(frameOf(apiVersionsReq(3), 1))
	if frame, err := plain.readFrame(); err == nil {
		t.Fatalf("plaintext ApiVersions on a TLS listener answered %q", frame)
	}

	m := startSecure(t, func(s *security.Settings) { s.SASL = nil; s.TLS.ClientAuth = "required" })
	noCert := kgoClient(t, m.addr(), kgo.DialTLSConfig(m.clientTLS(t, false)), kgo.RequestRetries(0))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, noCert); err == nil {
		t.Fatal("a client without certificate was served with client certificates required")
	}
	m.logs.waitLog(t, map[string]any{"message": "connection closed: handshake failed", "reason": "tls handshake failed"})
	withCert := kgoClient(t, m.addr(), kgo.DialTLSConfig(m.clientTLS(t, true)))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, withCert); err != nil {
		t.Fatalf("mTLS client: %v", err)
	}
}

// wire.DialWith reaches a TLS + SASL listener as the cluster principal
// (SCRAM-SHA-512 and PLAIN), whose WriteTxnMarkers passes; a wrong
// password fails with ErrAuthentication.
func TestDialWithTLSAndSASL(t *testing.T) {
	n := startSecure(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	dc, err := n.local.Settings.Dial()
	if err != nil {
		t.Fatal(err)
	}
	if dc.TLS == nil || dc.SASL == nil || dc.SASL.Mechanism != wire.MechanismSCRAMSHA512 || dc.SASL.User != security.LocalClusterUser {
		t.Fatalf("Settings.Dial: %+v", dc)
	}
	for _, mech := range []string{wire.MechanismSCRAMSHA512, wire.MechanismSCRAMSHA256, wire.MechanismPlain} {
		dc.SASL.Mechanism = mech
		cl, err := wire.DialWith(ctx, n.addr(), "marker-sender", dc)
		if err != nil {
			t.Fatalf("DialWith %s: %v", mech, err)
		}
		if _, err := cl.ApiVersions(ctx); err != nil {
			t.Fatal(err)
		}
		req := wtmRequest()
		req.SetVersion(2)
		resp, err := cl.Do(ctx, req)
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := wtmCodes(resp.(*kmsg.WriteTxnMarkersResponse)); got[0] != 0 || got[1] != 0 {
			t.Fatalf("WriteTxnMarkers over DialWith %s: %v", mech, got)
		}
	}
	dc.SASL.Pass = "wrong"
	if _, err := wire.DialWith(ctx, n.addr(), "marker-sender", dc); !errors.Is(err, wire.ErrAuthentication) {
		t.Fatalf("DialWith with a wrong password: %v, want ErrAuthentication", err)
	}
	dc.SASL = nil
	dc.TLS = nil
	if cl, err := wire.DialWith(ctx, n.addr(), "plaintext", dc); err == nil {
		_, err = cl.ApiVersions(ctx)
		cl.Close()
		if err == nil {
			t.Fatal("plaintext DialWith to a TLS listener worked")
		}
	}
}

// AddPartitionsToTxn v4+ is broker-only: a client principal gets a
// top-level 31 (and 31 per partition); v3 is a client request and passes.
func TestAddPartitionsToTxnV4NeedsClusterAction(t *testing.T) {
	n := startSecure(t, func(s *security.Settings) { s.TLS = nil })
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	dc := wire.DialConfig{SASL: &wire.ClientSASL{Mechanism: wire.MechanismSCRAMSHA256, User: n.local.ClientUser, Pass: n.local.ClientPassword}}
	cl, err := wire.DialWith(ctx, n.addr(), "client", dc)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	v4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	v4.SetVersion(4)
	txn := kmsg.NewAddPartitionsToTxnRequestTransaction()
	txn.TransactionalID, txn.ProducerID = "t1", 42
	tp := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tp.Topic, tp.Partitions = "orders", []int32{0}
	txn.Topics = append(txn.Topics, tp)
	v4.Transactions = append(v4.Transactions, txn)
	raw, err := cl.Do(ctx, v4)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 31 || len(resp.Transactions) != 1 || resp.Transactions[0].Topics[0].Partitions[0].ErrorCode != 31 {
		t.Fatalf("AddPartitionsToTxn v4 by a client: %+v", resp)
	}
	v3 := kmsg.NewPtrAddPartitionsToTxnRequest()
	v3.SetVersion(3)
	v3.TransactionalID = "t1"
	raw, err = cl.Do(ctx, v3)
	if err != nil {
		t.Fatal(err)
	}
	if resp := raw.(*kmsg.AddPartitionsToTxnResponse); resp.ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn v3 by a client: %+v", resp)
	}
}

// Without security every helper allows everything, as before.
func TestNoSecurityAllowsEverything(t *testing.T) {
	req := &wire.Request{Principal: ""}
	if !wire.ClusterAction(req) || !wire.TransactionalIDAllowed(req, kmsg.ACLOperationWrite, "x") {
		t.Fatal("security off must allow everything")
	}
}

func mustSecret(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Shutdown ends an authenticated idle TLS connection and one stuck in the
// TLS handshake gracefully: it returns nil, not its deadline's error.
func TestShutdownWithTLSConnections(t *testing.T) {
	n := startSecure(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	dc, err := n.local.Settings.Dial()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := wire.DialWith(ctx, n.addr(), "idle", dc)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Sends half a TLS record header and stalls. (Whether the server has
	// accepted it before Shutdown is not observable; either way it must
	// end without holding Shutdown up.)
	stuck := dialRaw(t, n.addr())
	stuck.write([]byte{0x16, 0x03})
	if _, err := cl.ApiVersions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.cluster.Coordinator().Server.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	stuck.expectClosed()
}

// A connection closed before its first byte (a load balancer's health
// check, a coordinator probing whether another's process is gone) is a
// Debug line on a TLS listener, not a failed handshake.
func TestTLSReachabilityCheckIsNotAFailure(t *testing.T) {
	n := startSecure(t, func(s *security.Settings) { s.SASL = nil })
	probe := dialRaw(t, n.addr())
	local := probe.local()
	probe.nc.Close()
	n.logs.waitLog(t, map[string]any{"message": "connection ended before the TLS handshake", "remote": local, "level": "debug"})
	if warned := n.logs.lines(map[string]any{"message": "connection closed: handshake failed", "remote": local}); len(warned) > 0 {
		t.Fatalf("a connection closed before its first byte logged %v", warned)
	}
}

// A SCRAM client whose final message carries another nonce than the
// server's (what librdkafka before 2.6.1 sends, whatever the password) is
// refused, and the log line names the likely cause; a plain wrong password
// is refused without it.
func TestSCRAMNonceMismatchIsExplained(t *testing.T) {
	n := startSecure(t, func(s *security.Settings) { s.TLS = nil })
	client, err := scram.SHA512.NewClient(n.local.ClientUser, n.local.ClientPassword, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := client.NewConversation()
	first, err := conv.Step("")
	if err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, n.addr())
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = wire.MechanismSCRAMSHA512
	if resp := c.roundTrip(hs, 1).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("SaslHandshake: %+v", resp)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(2)
	auth.SASLAuthBytes = []byte(first)
	resp := c.roundTrip(auth, 2).(*kmsg.SASLAuthenticateResponse)
	if resp.ErrorCode != 0 || len(resp.SASLAuthBytes) == 0 {
		t.Fatalf("SaslAuthenticate (client-first): code %d", resp.ErrorCode)
	}
	final, err := conv.Step(string(resp.SASLAuthBytes))
	if err != nil {
		t.Fatal(err)
	}
	// The nonce is the r= attribute, the server's extension of the
	// client's; librdkafka's bug sends its own.
	attrs := strings.Split(final, ",")
	for i, a := range attrs {
		if strings.HasPrefix(a, "r=") {
			attrs[i] = a[:len(a)-4] + "XXXX"
		}
	}
	auth.SASLAuthBytes = []byte(strings.Join(attrs, ","))
	if resp := c.roundTrip(auth, 3).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != 58 {
		t.Fatalf("SaslAuthenticate with another nonce: code %d, want 58", resp.ErrorCode)
	}
	line := n.logs.waitLog(t, map[string]any{"message": "connection closed: SASL authentication failed", "remote": c.local()})
	if cause, _ := line["likely_cause"].(string); !strings.Contains(cause, "librdkafka before 2.6.1") || !strings.Contains(cause, "PLAIN") {
		t.Fatalf("the line does not name the likely cause: %v", line)
	}

	// A wrong password fails on its proof, not on the nonce: no cause.
	cl := kgoClient(t, n.addr(), kgo.SASL(mechanism(wire.MechanismSCRAMSHA512, n.local.ClientUser, "wrong")), kgo.RequestRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong password: %v", err)
	}
	for _, l := range n.logs.lines(map[string]any{"message": "connection closed: SASL authentication failed"}) {
		if l["remote"] != c.local() && l["likely_cause"] != nil {
			t.Fatalf("a wrong password's line names a cause: %v", l)
		}
	}
}
