package node

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/coordinator"
	"github.com/txncoord/txncoord/leaderstub"
	"github.com/txncoord/txncoord/wire"
)

// EmbeddedConfig configures `txncoord up`: every node in one process.
type EmbeddedConfig struct {
	File                   *cluster.File
	DataDir                string
	AdminListen            string // "" = no admin API
	MarkerVersionDiscovery bool
	UnsafeNoSync           bool
	RetentionBytes         int64
	// Listeners, optional, are already-bound listeners by node id (tests
	// bind 127.0.0.1:0 first and write the cluster file from them).
	Listeners map[int32]net.Listener
	Log       zerolog.Logger
}

// Embedded is a running in-process cluster.
type Embedded struct {
	View        *cluster.View
	Coordinator *Coordinator
	Leaders     []*Leader
	Admin       *admin.Server
	Metrics     *prometheus.Registry
}

// NewMetrics returns a registry with the Go runtime and process collectors.
func NewMetrics() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// StartEmbedded starts the leaders, then the coordinator (which resends
// the markers of recovered Prepare* transactions to those leaders), then
// the admin API. On error everything already started is stopped.
func StartEmbedded(cfg EmbeddedConfig) (_ *Embedded, err error) {
	if cfg.UnsafeNoSync {
		cfg.Log.Warn().Msg("UNSAFE: --unsafe-no-fsync is on: acknowledged transactions and records are NOT durable; use only for throwaway test clusters")
	}
	e := &Embedded{View: cluster.NewView(cfg.File), Metrics: NewMetrics()}
	defer func() {
		if err != nil {
			e.Stop(context.Background())
		}
	}()
	for _, l := range cfg.File.Leaders {
		ln, err := StartLeader(LeaderConfig{
			View: e.View, NodeID: l.NodeID, DataDir: cfg.DataDir, RetentionBytes: cfg.RetentionBytes,
			UnsafeNoSync: cfg.UnsafeNoSync, Listener: cfg.Listeners[l.NodeID], Log: cfg.Log, Metrics: prometheus.WrapRegistererWith(prometheus.Labels{"node": fmt.Sprint(l.NodeID)}, e.Metrics),
		})
		if err != nil {
			return nil, err
		}
		e.Leaders = append(e.Leaders, ln)
	}
	e.Coordinator, err = StartCoordinator(CoordinatorConfig{
		View: e.View, DataDir: cfg.DataDir, MarkerVersionDiscovery: cfg.MarkerVersionDiscovery,
		UnsafeNoSync: cfg.UnsafeNoSync, Listener: cfg.Listeners[cfg.File.Coordinator.NodeID], Log: cfg.Log, Metrics: e.Metrics,
	})
	if err != nil {
		return nil, err
	}
	if cfg.AdminListen != "" {
		token, open, err := AdminToken(cfg.File)
		if err != nil {
			return nil, err
		}
		e.Admin, err = admin.Start(cfg.AdminListen, e.Coordinator.AdminBackend(), e.Metrics, admin.Auth{Token: token, Open: open}, cfg.Log)
		if err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Bootstrap is the address clients bootstrap from (the coordinator's).
func (e *Embedded) Bootstrap() string { return e.Coordinator.Server.Addr().String() }

// Stop stops the admin API, the coordinator, then the leaders.
func (e *Embedded) Stop(ctx context.Context) error {
	var errs []error
	if e.Admin != nil {
		errs = append(errs, e.Admin.Shutdown(ctx))
	}
	if e.Coordinator != nil {
		errs = append(errs, e.Coordinator.Stop(ctx))
	}
	for _, l := range e.Leaders {
		errs = append(errs, l.Stop(ctx))
	}
	return errors.Join(errs...)
}

// securityOf returns the listener security and the inter-node dial settings
// of the cluster file (nil and zero when it has no security section).
func securityOf(v *cluster.View) (*wire.SecurityConfig, wire.DialConfig, error) {
	sec, err := v.File().Security.Server()
	if err != nil {
		return nil, wire.DialConfig{}, fmt.Errorf("security: %w", err)
	}
	dial, err := v.File().Security.Dial()
	if err != nil {
		return nil, wire.DialConfig{}, fmt.Errorf("security: %w", err)
	}
	return sec, dial, nil
}

// AdminToken is the admin API's bearer token ("" when none is configured)
// and the paths left open without it.
func AdminToken(f *cluster.File) (token string, open []string, err error) {
	if f.Security == nil {
		return "", nil, nil
	}
	token, err = f.Security.AdminToken()
	if f.Security.OpenMetrics {
		open = []string{"/metrics", "/healthz", "/readyz"}
	}
	return token, open, err
}

// listen starts a node's Kafka listener: the handlers every node serves
// (Metadata, FindCoordinator; ApiVersions is built into wire) plus the
// role's own, advertised within the node's version profile.
func listen(v *cluster.View, self cluster.Node, profile *kversion.Versions, ln net.Listener,
	sec *wire.SecurityConfig, log zerolog.Logger, registerRole func(*wire.Registry)) (*wire.Server, error) {
	reg := wire.NewRegistry()
	v.RegisterMetadata(reg)
	v.RegisterFindCoordinator(reg)
	registerRole(reg)
	cluster.RegisterNotServed(reg, leaderstub.APIs)
	cluster.RegisterNotServed(reg, coordinator.APIs)
	return wire.Start(wire.Config{
		Addr:     self.Addr,
		Listener: ln,
		Registry: reg,
		Security: sec,
		Profile:  profile,
		Features: func() wire.Features { return v.Features(self.KafkaVersion) },
		Log:      log,
	})
}
