package integration

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSuitesWithSecurity runs the end-to-end scenarios again with TLS +
// SASL on every listener and cluster authorization on: clients connect as
// the SCRAM-SHA-512 client user, the marker sender and the leaders
// authenticate to each other as the cluster principal.
func TestSuitesWithSecurity(t *testing.T) {
	for name, run := range map[string]func(*testing.T, bool){
		"TV2EpochBumpsPerTransaction":    runTV2EpochBumpsPerTransaction,
		"TV1ClientKeepsEpoch":            runTV1ClientKeepsEpoch,
		"AbortInvisibleToReadCommitted":  runAbortInvisibleToReadCommitted,
		"SecondClientFencesFirst":        runSecondClientFencesFirst,
		"MixedLeadersNegotiatePerLeader": runMixedLeadersNegotiatePerLeader,
		"DiscoveryOffReportsStuck":       runDiscoveryOffReportsStuck,
	} {
		t.Run(name, func(t *testing.T) { run(t, true) })
	}
}

// TestSecureClusterRefusesPlainClients shows the secure harness really is
// secure: a client without TLS and SASL gets nothing.
func TestSecureClusterRefusesPlainClients(t *testing.T) {
	c := StartCluster(t, Options{Secure: true, LeaderVersions: []string{"4.2"}})
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.File.Coordinator.Addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(testCtx(t, 5*time.Second), plain); err == nil {
		t.Fatal("a plaintext client without SASL got Metadata from a secure cluster")
	}
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(testCtx(t, 5*time.Second), c.Client()); err != nil {
		t.Fatalf("the TLS + SCRAM client: %v", err)
	}
}
