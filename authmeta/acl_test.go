package authmeta

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func allow(typ kmsg.ACLResourceType, name string, pat kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation) Binding {
	return Binding{ResourceType: typ, Name: name, Pattern: pat, Principal: principal, Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

func deny(b Binding) Binding {
	b.Permission = kmsg.ACLPermissionTypeDeny
	return b
}

const (
	topic   = kmsg.ACLResourceTypeTopic
	group   = kmsg.ACLResourceTypeGroup
	literal = kmsg.ACLResourcePatternTypeLiteral
	prefix  = kmsg.ACLResourcePatternTypePrefixed
)

// TestDecide: Kafka's authorization rules over bindings.
func TestDecide(t *testing.T) {
	for _, c := range []struct {
		name      string
		bindings  []Binding
		principal string
		host      string
		op        kmsg.ACLOperation
		typ       kmsg.ACLResourceType
		res       string
		want      Decision
	}{
		{"no ACLs", nil, "User:a", "1.2.3.4", kmsg.ACLOperationRead, topic, "t", NoACLs},
		{"literal allow", []Binding{allow(topic, "t", literal, "User:a", kmsg.ACLOperationRead)}, "User:a", "h", kmsg.ACLOperationRead, topic, "t", Allowed},
		{"another principal on a covered resource", []Binding{allow(topic, "t", literal, "User:a", kmsg.ACLOperationRead)}, "User:b", "h", kmsg.ACLOperationRead, topic, "t", Denied},
		{"another resource stays uncovered", []Binding{allow(topic, "t", literal, "User:a", kmsg.ACLOperationRead)}, "User:b", "h", kmsg.ACLOperationRead, topic, "u", NoACLs},
		{"prefixed allow", []Binding{allow(topic, "orders-", prefix, "User:a", kmsg.ACLOperationWrite)}, "User:a", "h", kmsg.ACLOperationWrite, topic, "orders-eu", Allowed},
		{"prefix does not match", []Binding{allow(topic, "orders-", prefix, "User:a", kmsg.ACLOperationWrite)}, "User:a", "h", kmsg.ACLOperationWrite, topic, "payments", NoACLs},
		{"literal wildcard resource", []Binding{allow(topic, "*", literal, "User:a", kmsg.ACLOperationRead)}, "User:a", "h", kmsg.ACLOperationRead, topic, "any", Allowed},
		{"wildcard principal", []Binding{allow(topic, "t", literal, "User:*", kmsg.ACLOperationRead)}, "User:z", "h", kmsg.ACLOperationRead, topic, "t", Allowed},
		{"deny beats allow", []Binding{allow(topic, "t", literal, "User:a", kmsg.ACLOperationAll), deny(allow(topic, "t", prefix, "User:a", kmsg.ACLOperationWrite))}, "User:a", "h", kmsg.ACLOperationWrite, topic, "t", Denied},
		{"deny of another op", []Binding{allow(topic, "t", literal, "User:a", kmsg.ACLOperationAll), deny(allow(topic, "t", literal, "User:a", kmsg.ACLOperationWrite))}, "User:a", "h", kmsg.ACLOperationRead, topic, "t", Allowed},
		{"read implies describe", []Binding{allow(topic, "t", literal, "User:a", kmsg.ACLOperationRead)}, "User:a", "h", kmsg.ACLOperationDescribe, topic, "t", Allowed},
		{"alter implies describe", []Binding{allow(group, "g", literal, "User:a", kmsg.ACLOperationDelete)}, "User:a", "h", kmsg.ACLOperationDescribe, group, "g", Allowed},
		{"alter_configs implies describe_configs", []Binding{allow(topic, "t", literal, "User:a", kmsg.ACLOperationAlterConfigs)}, "User:a", "h", kmsg.ACLOperationDescribeConfigs, topic, "t", Allowed},
		{"describe does not imply read", []Binding{allow(topic, "t", literal, "User:a", kmsg.ACLOperationDescribe)}, "User:a", "h", kmsg.ACLOperationRead, topic, "t", Denied},
		{"deny read does not deny describe", []Binding{allow(topic, "t", literal, "User:a", kmsg.ACLOperationDescribe), deny(allow(topic, "t", literal, "User:a", kmsg.ACLOperationRead))}, "User:a", "h", kmsg.ACLOperationDescribe, topic, "t", Allowed},
		{"host mismatch", []Binding{{ResourceType: topic, Name: "t", Pattern: literal, Principal: "User:a", Host: "10.0.0.1", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}}, "User:a", "10.0.0.2", kmsg.ACLOperationRead, topic, "t", Denied},
		{"host match", []Binding{{ResourceType: topic, Name: "t", Pattern: literal, Principal: "User:a", Host: "10.0.0.1", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}}, "User:a", "10.0.0.1", kmsg.ACLOperationRead, topic, "t", Allowed},
	} {
		if got := decide(c.bindings, c.principal, c.host, c.op, c.typ, c.res); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
}

// TestFilterMatch: Kafka's AclBindingFilter, MATCH included.
func TestFilterMatch(t *testing.T) {
	lit := allow(topic, "orders-eu", literal, "User:a", kmsg.ACLOperationRead)
	pre := allow(topic, "orders-", prefix, "User:a", kmsg.ACLOperationRead)
	star := allow(topic, "*", literal, "User:a", kmsg.ACLOperationRead)
	name := func(s string) *string { return &s }
	any := Filter{ResourceType: kmsg.ACLResourceTypeAny, Pattern: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	match := any
	match.Pattern, match.Name = kmsg.ACLResourcePatternTypeMatch, name("orders-eu")
	for _, b := range []Binding{lit, pre, star} {
		if !any.Matches(b) {
			t.Errorf("ANY does not match %+v", b)
		}
		if !match.Matches(b) {
			t.Errorf("MATCH orders-eu does not match %+v", b)
		}
	}
	match.Name = name("payments")
	if match.Matches(lit) || match.Matches(pre) || !match.Matches(star) {
		t.Error("MATCH payments: want only the * binding")
	}
	litOnly := any
	litOnly.Pattern, litOnly.Name = literal, name("orders-")
	if litOnly.Matches(pre) || litOnly.Matches(lit) {
		t.Error("LITERAL orders- matched a prefixed binding or another name")
	}
	denies := any
	denies.Permission = kmsg.ACLPermissionTypeDeny
	if denies.Matches(lit) {
		t.Error("a DENY filter matched an ALLOW binding")
	}
}

// TestValidBinding: what CreateAcls refuses with INVALID_REQUEST.
func TestValidBinding(t *testing.T) {
	ok := allow(topic, "t", literal, "User:a", kmsg.ACLOperationRead)
	if msg := validBinding(ok); msg != "" {
		t.Fatalf("valid binding refused: %s", msg)
	}
	for name, edit := range map[string]func(*Binding){
		"any resource type":  func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeAny },
		"match pattern":      func(b *Binding) { b.Pattern = kmsg.ACLResourcePatternTypeMatch },
		"any operation":      func(b *Binding) { b.Operation = kmsg.ACLOperationAny },
		"any permission":     func(b *Binding) { b.Permission = kmsg.ACLPermissionTypeAny },
		"empty name":         func(b *Binding) { b.Name = "" },
		"principal no colon": func(b *Binding) { b.Principal = "alice" },
		"empty host":         func(b *Binding) { b.Host = "" },
		"cluster other name": func(b *Binding) { b.ResourceType, b.Name = kmsg.ACLResourceTypeCluster, "c" },
		"prefixed cluster":   func(b *Binding) { b.ResourceType, b.Name, b.Pattern = kmsg.ACLResourceTypeCluster, ClusterName, prefix },
	} {
		b := ok
		edit(&b)
		if validBinding(b) == "" {
			t.Errorf("%s: accepted", name)
		}
	}
}
