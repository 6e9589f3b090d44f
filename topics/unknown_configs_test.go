package topics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/internal/freeport"
	"github.com/txncoord/txncoord/node"
)

// TestUnknownTopicConfigsRefused: every path that takes topic configs
// refuses a name Kafka does not know with Kafka's answer, INVALID_CONFIG
// "Unknown topic config name: NAME" (LogConfig.validateNames, through the
// controller's ConfigurationControlManager), and changes nothing; APPEND
// and SUBTRACT of an unknown or non-list config get the controller's
// "Can't APPEND to key ..."; null values and repeated keys are the
// broker's INVALID_REQUEST. Paths: CreateTopics (kadm, sarama,
// ValidateOnly), AlterConfigs (kadm's legacy alter), IncrementalAlterConfigs
// (kadm, sarama), the admin API's POST /v1/topics. The CLI's `topics
// create --config` and `topics alter-config` are the admin API and
// IncrementalAlterConfigs (cmd/txncoord TestAlterCommands).
func TestUnknownTopicConfigsRefused(t *testing.T) {
	port, err := freeport.Run(1)
	if err != nil {
		t.Fatal(err)
	}
	adminAddr := fmt.Sprintf("127.0.0.1:%d", port)
	f, e, cl := startEmbedded(t, node.EmbeddedSpec{}, func(c *node.EmbeddedConfig) { c.AdminListen = adminAddr })
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "known"); err != nil {
		t.Fatal(err)
	}
	conf := sarama.NewConfig()
	conf.Version = sarama.V3_9_0_0
	sa, err := sarama.NewClusterAdmin([]string{f.Coordinator.Addr}, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()

	const unknown = "Unknown topic config name: no.such.config"
	incremental := func(cfgs ...kadm.AlterConfig) (error, string) {
		res, err := adm.AlterTopicConfigs(ctx, cfgs, "known")
		if err != nil {
			return err, ""
		}
		return res[0].Err, res[0].ErrMessage
	}
	for _, tc := range []struct {
		name     string
		do       func() (err error, message string)
		want     error
		message  string
		creates  string // a topic that must not exist after
		saramaOK bool
	}{
		{name: "CreateTopics kadm", do: func() (error, string) {
			res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"no.such.config": kadm.StringPtr("1")}, "bad-kadm")
			if err != nil && res.Err == nil {
				return err, ""
			}
			return res.Err, res.ErrMessage
		}, want: kerr.InvalidConfig, message: unknown, creates: "bad-kadm"},
		{name: "CreateTopics validate only", do: func() (error, string) {
			res, err := adm.ValidateCreateTopics(ctx, 1, 1, map[string]*string{"no.such.config": kadm.StringPtr("1")}, "bad-validate")
			if err != nil {
				return err, ""
			}
			r, _ := res.On("bad-validate", nil)
			return r.Err, r.ErrMessage
		}, want: kerr.InvalidConfig, message: unknown, creates: "bad-validate"},
		{name: "CreateTopics sarama", do: func() (error, string) {
			v := "1"
			err := sa.CreateTopic("bad-sarama", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
				ConfigEntries: map[string]*string{"no.such.config": &v}}, false)
			var te *sarama.TopicError
			if errors.As(err, &te) && te.Err == sarama.ErrInvalidConfig && te.ErrMsg != nil {
				return kerr.InvalidConfig, *te.ErrMsg
			}
			return err, ""
		}, want: kerr.InvalidConfig, message: unknown, creates: "bad-sarama"},
		{name: "AlterConfigs (legacy)", do: func() (error, string) {
			res, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "no.such.config", Value: kadm.StringPtr("1")}}, "known")
			if err != nil {
				return err, ""
			}
			return res[0].Err, res[0].ErrMessage
		}, want: kerr.InvalidConfig, message: unknown},
		{name: "AlterConfigs sarama", do: func() (error, string) {
			v := "1"
			err := sa.AlterConfig(sarama.TopicResource, "known", map[string]*string{"no.such.config": &v}, false)
			if err != nil && strings.Contains(err.Error(), unknown) {
				return kerr.InvalidConfig, unknown
			}
			return err, ""
		}, want: kerr.InvalidConfig, message: unknown},
		{name: "IncrementalAlterConfigs SET", do: func() (error, string) {
			return incremental(kadm.AlterConfig{Op: kadm.SetConfig, Name: "no.such.config", Value: kadm.StringPtr("1")})
		}, want: kerr.InvalidConfig, message: unknown},
		{name: "IncrementalAlterConfigs SET sarama", do: func() (error, string) {
			v := "1"
			err := sa.IncrementalAlterConfig(sarama.TopicResource, "known",
				map[string]sarama.IncrementalAlterConfigsEntry{"no.such.config": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &v}}, false)
			if err != nil && strings.Contains(err.Error(), unknown) {
				return kerr.InvalidConfig, unknown
			}
			return err, ""
		}, want: kerr.InvalidConfig, message: unknown},
		{name: "IncrementalAlterConfigs APPEND unknown", do: func() (error, string) {
			return incremental(kadm.AlterConfig{Op: kadm.AppendConfig, Name: "no.such.config", Value: kadm.StringPtr("1")})
		}, want: kerr.InvalidConfig, message: "Can't APPEND to key no.such.config because its type is not LIST."},
		{name: "IncrementalAlterConfigs SUBTRACT from a LONG", do: func() (error, string) {
			return incremental(kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "retention.ms", Value: kadm.StringPtr("1")})
		}, want: kerr.InvalidConfig, message: "Can't SUBTRACT to key retention.ms because its type is not LIST."},
		{name: "IncrementalAlterConfigs SET null", do: func() (error, string) {
			return incremental(kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms"})
		}, want: kerr.InvalidRequest, message: "Null value not supported for : retention.ms"},
		{name: "IncrementalAlterConfigs repeated key", do: func() (error, string) {
			return incremental(kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("1")},
				kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"})
		}, want: kerr.InvalidRequest, message: "Error due to duplicate config keys"},
		{name: "admin API POST /v1/topics", do: func() (error, string) {
			_, err := admin.NewClient("http://"+adminAddr).CreateTopic(ctx, admin.CreateTopic{Name: "bad-admin", Partitions: 1,
				Configs: map[string]string{"no.such.config": "1"}})
			var apiErr *admin.APIError
			if errors.As(err, &apiErr) && apiErr.Status == http.StatusBadRequest {
				return kerr.InvalidConfig, apiErr.Message
			}
			return err, ""
		}, want: kerr.InvalidConfig, message: unknown, creates: "bad-admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, msg := tc.do()
			if !errors.Is(err, tc.want) || !strings.Contains(msg, tc.message) {
				t.Fatalf("got %v %q, want %v %q", err, msg, tc.want, tc.message)
			}
			if tc.creates != "" {
				if _, ok := e.View.Topic(tc.creates); ok {
					t.Fatalf("topic %s was created", tc.creates)
				}
			}
			if got := e.View.TopicConfigs("known"); len(got) != 1 || got["retention.ms"] != "60000" {
				t.Fatalf("known's configs changed: %v", got)
			}
		})
	}

	// APPEND and SUBTRACT on cleanup.policy, as the controller: from the
	// default (delete) when unset, no duplicate, values not trimmed.
	if err, msg := incremental(kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"}); err != nil {
		t.Fatalf("DELETE retention.ms: %v %s", err, msg)
	}
	for _, step := range []struct {
		op   kadm.IncrementalOp
		val  string
		want string
	}{
		{kadm.AppendConfig, "compact", "delete,compact"},
		{kadm.AppendConfig, "compact,delete", "delete,compact"},
		{kadm.SubtractConfig, "delete", "compact"},
		{kadm.SubtractConfig, "compact", ""},
		{kadm.AppendConfig, "delete", "delete"},
	} {
		if err, msg := incremental(kadm.AlterConfig{Op: step.op, Name: "cleanup.policy", Value: kadm.StringPtr(step.val)}); err != nil {
			t.Fatalf("%v %s: %v %s", step.op, step.val, err, msg)
		}
		if got := e.View.TopicConfigs("known")["cleanup.policy"]; got != step.want {
			t.Fatalf("after %v %s: cleanup.policy=%q, want %q", step.op, step.val, got, step.want)
		}
	}
	// The appended value is kept as given; the LIST parser trims around
	// commas, so it is valid.
	if err, msg := incremental(kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr(" compact")}); err != nil {
		t.Fatalf("APPEND ' compact': %v %s", err, msg)
	}
	if got := e.View.TopicConfigs("known")["cleanup.policy"]; got != "delete, compact" {
		t.Fatalf("after APPEND ' compact': cleanup.policy=%q, want %q", got, "delete, compact")
	}
	if v := e.View.TopicValues("known"); !v.Compact || !v.Delete {
		t.Fatalf("resolved after APPEND ' compact': %+v", v)
	}
}
