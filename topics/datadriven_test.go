package topics

import (
	"context"
	"fmt"
	"github.com/txncoord/txncoord/authmeta"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/cluster"
	"github.com/txncoord/txncoord/internal/datadriven"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/wire"
)

// fixture is a controller on a store of its own, with three leaders,
// default_partitions 3 and the file topic orders:6.
type fixture struct {
	t     *testing.T
	dir   string
	file  *cluster.File
	view  *cluster.View
	store *storage.Store
	ctl   *Controller
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &cluster.File{ClusterID: "topics-test", DefaultPartitions: 3, Topics: map[string]int32{"orders": 6},
		Coordinator: &cluster.Node{NodeID: 0, Addr: "127.0.0.1:9092", KafkaVersion: "4.2"}}
	for i := range 3 {
		f.Leaders = append(f.Leaders, cluster.Node{NodeID: int32(i + 1), Addr: fmt.Sprintf("127.0.0.1:%d", 9093+i), KafkaVersion: "4.2"})
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	fx := &fixture{t: t, dir: t.TempDir(), file: f}
	fx.open()
	t.Cleanup(fx.close)
	return fx
}

func (fx *fixture) open() {
	fx.t.Helper()
	st, err := storage.Open(filepath.Join(fx.dir, "store.db"), storage.Options{NoSync: true, Log: zerolog.Nop(),
		Kinds: map[storage.Kind]storage.ApplyFunc{storage.KindTopic: ApplyRecord, storage.KindAuthMeta: authmeta.ApplyRecord}})
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.store, fx.view = st, cluster.NewView(fx.file)
	if fx.ctl, err = Open(Config{View: fx.view, Store: st, Log: zerolog.Nop()}); err != nil {
		fx.t.Fatal(err)
	}
	fx.view.SetCreator(fx.ctl.AutoCreate)
}

func (fx *fixture) close() {
	if fx.ctl != nil {
		fx.ctl.Close()
		fx.store.Close()
		fx.ctl = nil
	}
}

func (fx *fixture) call(h wire.Handler, req kmsg.Request, version int16) kmsg.Response {
	fx.t.Helper()
	req.SetVersion(version)
	resp, err := h(context.Background(), &wire.Request{Body: req, Key: req.Key(), Version: version})()
	if err != nil {
		fx.t.Fatal(err)
	}
	return resp
}

// incarnationOf names a topic id by the incarnation it derives from.
func (fx *fixture) incarnationOf(name string, id [16]byte) string {
	for inc := range uint32(10) {
		if cluster.TopicIDOf(fx.file.ClusterID, name, inc) == id {
			return strconv.Itoa(int(inc))
		}
	}
	if id == [16]byte{} {
		return "null"
	}
	return "?"
}

func errText(code int16, msg *string) string {
	if code == 0 {
		return "OK"
	}
	out := kerr.ErrorForCode(code).(*kerr.Error).Message
	if msg != nil {
		out += " " + *msg
	}
	return out
}

// fields splits an input line into key=value words (a key may repeat).
func fields(line string) [][2]string {
	var out [][2]string
	for _, w := range strings.Fields(line) {
		k, v, _ := strings.Cut(w, "=")
		out = append(out, [2]string{k, v})
	}
	return out
}

func atoi(t *testing.T, s string) int32 {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return int32(n)
}

// replicaList parses B[+B...].
func replicaList(t *testing.T, s string) []int32 {
	var out []int32
	for _, b := range strings.Split(s, "+") {
		out = append(out, atoi(t, b))
	}
	return out
}

// TestDataDriven replays testdata/*.txt (format: internal/datadriven):
//
//	create-topics [v=N] [validate-only]   one topic per input line:
//	    name=T [partitions=N] [rf=N] [config=K=V | config=K (null)]... [assign=P:B[+B...],...]
//	delete-topics [v=N]                   one per line: name=T | id-of=T | id=zero | name=T id-of=U
//	create-partitions [validate-only]     one per line: name=T count=N [assign=B[+B...],...]
//	placement name=T                      each partition's leader and replicas (View.LeaderOf, ReplicasOf)
//	auto-create name=T                    the view's creator (Metadata auto-creation)
//	alter-configs name=T [K=V]...         the whole config after the change
//	restart                               reopen the store and the controller
//	list                                  the view's topics: name, partitions, incarnation, configs
//
// go test ./topics -run TestDataDriven -args -rewrite refreshes the outputs.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/*.txt", func(t *testing.T, path string) {
		fx := newFixture(t)
		datadriven.RunFile(t, path, func(t *testing.T, c *datadriven.Case) string {
			version := int16(atoi(t, c.Arg("v", "7")))
			switch c.Cmd {
			case "create-topics":
				return fx.createTopics(c, version)
			case "delete-topics":
				return fx.deleteTopics(c, version)
			case "create-partitions":
				return fx.createPartitions(c)
			case "auto-create":
				tp, err := fx.view.EnsureTopic(c.Arg("name", ""))
				if err != nil {
					return "error: " + err.Error()
				}
				return fmt.Sprintf("%s partitions=%d incarnation=%s", tp.Name, tp.Partitions, fx.incarnationOf(tp.Name, tp.ID))
			case "alter-configs":
				configs := map[string]string{}
				for k, v := range c.Args {
					if k != "name" {
						configs[k] = v
					}
				}
				if err := fx.ctl.AlterConfigs(context.Background(), c.Arg("name", ""), configs, c.Has("validate-only")); err != nil {
					return "error: " + err.Error()
				}
				return "ok"
			case "placement":
				var b strings.Builder
				name := c.Arg("name", "")
				tp, _ := fx.view.Topic(name)
				for p := range tp.Partitions {
					leader, _ := fx.view.LeaderOf(name, p)
					fmt.Fprintf(&b, "%d: leader=%d replicas=%v\n", p, leader.NodeID, fx.view.ReplicasOf(name, p))
				}
				return b.String()
			case "restart":
				fx.close()
				fx.open()
				return "restarted"
			case "list":
				var b strings.Builder
				for _, tp := range fx.view.Topics() {
					if tp.Internal {
						continue
					}
					fmt.Fprintf(&b, "%s partitions=%d incarnation=%s", tp.Name, tp.Partitions, fx.incarnationOf(tp.Name, tp.ID))
					cfg := fx.view.TopicConfigs(tp.Name)
					for _, k := range sortedKeys(cfg) {
						fmt.Fprintf(&b, " %s=%s", k, cfg[k])
					}
					b.WriteString("\n")
				}
				return b.String()
			}
			t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
			return ""
		})
	})
}

func (fx *fixture) createTopics(c *datadriven.Case, version int16) string {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly = c.Has("validate-only")
	for _, line := range c.Input {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		for _, kv := range fields(line) {
			switch kv[0] {
			case "name":
				rt.Topic = kv[1]
			case "partitions":
				rt.NumPartitions = atoi(fx.t, kv[1])
			case "rf":
				rt.ReplicationFactor = int16(atoi(fx.t, kv[1]))
			case "config":
				cfg := kmsg.NewCreateTopicsRequestTopicConfig()
				k, v, ok := strings.Cut(kv[1], "=")
				cfg.Name = k
				if ok {
					cfg.Value = kmsg.StringPtr(v)
				}
				rt.Configs = append(rt.Configs, cfg)
			case "assign":
				for _, pb := range strings.Split(kv[1], ",") {
					p, b, _ := strings.Cut(pb, ":")
					a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
					a.Partition, a.Replicas = atoi(fx.t, p), replicaList(fx.t, b)
					rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
				}
			default:
				fx.t.Fatalf("%s: unknown field %q", c.Pos, kv[0])
			}
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := fx.call(fx.ctl.handleCreateTopics, req, version).(*kmsg.CreateTopicsResponse)
	var b strings.Builder
	for _, rt := range resp.Topics {
		fmt.Fprintf(&b, "%s: %s", rt.Topic, errText(rt.ErrorCode, rt.ErrorMessage))
		if rt.ErrorCode == 0 && version >= 5 {
			fmt.Fprintf(&b, " partitions=%d rf=%d", rt.NumPartitions, rt.ReplicationFactor)
			for _, cfg := range rt.Configs {
				if cfg.Source == int8(kmsg.ConfigSourceDynamicTopicConfig) {
					fmt.Fprintf(&b, " %s=%s", cfg.Name, *cfg.Value)
				}
			}
			fmt.Fprintf(&b, " configs=%d", len(rt.Configs))
		}
		if rt.ErrorCode == 0 && version >= 7 {
			fmt.Fprintf(&b, " incarnation=%s", fx.incarnationOf(rt.Topic, rt.TopicID))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (fx *fixture) deleteTopics(c *datadriven.Case, version int16) string {
	req := kmsg.NewPtrDeleteTopicsRequest()
	for _, line := range c.Input {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		for _, kv := range fields(line) {
			switch kv[0] {
			case "name":
				if version < 6 {
					req.TopicNames = append(req.TopicNames, kv[1])
					continue
				}
				rt.Topic = kmsg.StringPtr(kv[1])
			case "id-of":
				t, ok := fx.view.Topic(kv[1])
				if !ok {
					t.ID = cluster.TopicIDOf(fx.file.ClusterID, kv[1], 0)
				}
				rt.TopicID = t.ID
			case "id":
			}
		}
		if version >= 6 {
			req.Topics = append(req.Topics, rt)
		}
	}
	resp := fx.call(fx.ctl.handleDeleteTopics, req, version).(*kmsg.DeleteTopicsResponse)
	var b strings.Builder
	for _, rt := range resp.Topics {
		name := "null"
		if rt.Topic != nil {
			name = *rt.Topic
		}
		fmt.Fprintf(&b, "%s: %s", name, errText(rt.ErrorCode, rt.ErrorMessage))
		if version >= 6 {
			fmt.Fprintf(&b, " id-incarnation=%s", fx.incarnationOf(name, rt.TopicID))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (fx *fixture) createPartitions(c *datadriven.Case) string {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.ValidateOnly = c.Has("validate-only")
	for _, line := range c.Input {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		for _, kv := range fields(line) {
			switch kv[0] {
			case "name":
				rt.Topic = kv[1]
			case "count":
				rt.Count = atoi(fx.t, kv[1])
			case "assign":
				rt.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{}
				for _, b := range strings.Split(kv[1], ",") {
					a := kmsg.NewCreatePartitionsRequestTopicAssignment()
					a.Replicas = replicaList(fx.t, b)
					rt.Assignment = append(rt.Assignment, a)
				}
			}
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := fx.call(fx.ctl.handleCreatePartitions, req, 3).(*kmsg.CreatePartitionsResponse)
	var b strings.Builder
	for _, rt := range resp.Topics {
		fmt.Fprintf(&b, "%s: %s\n", rt.Topic, errText(rt.ErrorCode, rt.ErrorMessage))
	}
	return b.String()
}
