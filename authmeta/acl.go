package authmeta

import (
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Binding is one ACL: a resource pattern and an access control entry.
type Binding struct {
	ResourceType kmsg.ACLResourceType
	Name         string
	Pattern      kmsg.ACLResourcePatternType
	Principal    string
	Host         string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Filter selects bindings (DescribeAcls, DeleteAcls): a nil string matches
// anything, as do the ANY enum values; the pattern type MATCH selects the
// literal and prefixed bindings that would apply to the named resource.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	Name         *string
	Pattern      kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// ClusterName is the one cluster resource's name.
const ClusterName = "kafka-cluster"

// wildcard is the literal resource name and host that match every one.
const wildcard = "*"

// wildcardPrincipal matches every user principal.
const wildcardPrincipal = "User:*"

// validBinding is Kafka's validation of a new ACL (AclControlManager):
// the message of its INVALID_REQUEST, or "".
func validBinding(b Binding) string {
	switch {
	case b.ResourceType <= kmsg.ACLResourceTypeAny || b.ResourceType > kmsg.ACLResourceTypeUser:
		return "Invalid resourceType " + b.ResourceType.String()
	case b.Pattern != kmsg.ACLResourcePatternTypeLiteral && b.Pattern != kmsg.ACLResourcePatternTypePrefixed:
		return "Invalid patternType " + b.Pattern.String()
	case b.Operation <= kmsg.ACLOperationAny || b.Operation > kmsg.ACLOperationDescribeTokens:
		return "Invalid operation " + b.Operation.String()
	case b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny:
		return "Invalid permissionType " + b.Permission.String()
	case b.Name == "":
		return "Resource name should not be empty"
	case b.ResourceType == kmsg.ACLResourceTypeCluster && (b.Name != ClusterName || b.Pattern != kmsg.ACLResourcePatternTypeLiteral):
		return "The only valid name for the CLUSTER resource is " + ClusterName
	case b.Host == "":
		return "Invalid host: the host must not be empty (use * for any host)"
	}
	if typ, name, ok := strings.Cut(b.Principal, ":"); !ok || typ == "" || name == "" {
		return "Could not parse principal from `" + b.Principal + "` (no colon is present separating the principal type from the principal name)"
	}
	return ""
}

// validFilter is Kafka's check of a describe or delete filter: UNKNOWN
// values are INVALID_REQUEST.
func validFilter(f Filter) string {
	if f.ResourceType == kmsg.ACLResourceTypeUnknown || f.Pattern == kmsg.ACLResourcePatternTypeUnknown ||
		f.Operation == kmsg.ACLOperationUnknown || f.Permission == kmsg.ACLPermissionTypeUnknown {
		return "The filter contains UNKNOWN elements"
	}
	return ""
}

// Matches is Kafka's AclBindingFilter.matches.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	switch f.Pattern {
	case kmsg.ACLResourcePatternTypeAny:
		if f.Name != nil && *f.Name != b.Name {
			return false
		}
	case kmsg.ACLResourcePatternTypeMatch:
		if f.Name != nil {
			switch b.Pattern {
			case kmsg.ACLResourcePatternTypeLiteral:
				if b.Name != *f.Name && b.Name != wildcard {
					return false
				}
			case kmsg.ACLResourcePatternTypePrefixed:
				if !strings.HasPrefix(*f.Name, b.Name) {
					return false
				}
			default:
				return false
			}
		}
	default:
		if f.Pattern != b.Pattern || (f.Name != nil && *f.Name != b.Name) {
			return false
		}
	}
	return (f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == kmsg.ACLOperationAny || f.Operation == b.Operation) &&
		(f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission)
}

// appliesTo reports whether b's resource pattern covers the resource.
func (b Binding) appliesTo(typ kmsg.ACLResourceType, name string) bool {
	if b.ResourceType != typ {
		return false
	}
	if b.Pattern == kmsg.ACLResourcePatternTypePrefixed {
		return strings.HasPrefix(name, b.Name)
	}
	return b.Name == name || b.Name == wildcard
}

func (b Binding) forPrincipal(principal, host string) bool {
	return (b.Principal == principal || (b.Principal == wildcardPrincipal && strings.HasPrefix(principal, "User:"))) &&
		(b.Host == host || b.Host == wildcard)
}

// grants reports whether b, an ALLOW or DENY on op's resource, is about
// op: the operation itself or ALL, and for ALLOW the operations that imply
// it (KIP-253: READ, WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS
// implies DESCRIBE_CONFIGS).
func (b Binding) grants(op kmsg.ACLOperation) bool {
	if b.Operation == op || b.Operation == kmsg.ACLOperationAll {
		return true
	}
	if b.Permission != kmsg.ACLPermissionTypeAllow {
		return false
	}
	switch op {
	case kmsg.ACLOperationDescribe:
		switch b.Operation {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return b.Operation == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// Decision is what the ACLs say about one operation.
type Decision int

const (
	// NoACLs: no binding covers the resource; the fallback rules decide
	// (allow.everyone.if.no.acl.found).
	NoACLs Decision = iota
	// Allowed by a matching ALLOW and no matching DENY.
	Allowed
	// Denied by a matching DENY, or by the lack of a matching ALLOW on a
	// resource that has ACLs.
	Denied
)

// decide is Kafka's authorization of one operation against bindings.
func decide(bindings []Binding, principal, host string, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) Decision {
	covered, allowed := false, false
	for _, b := range bindings {
		if !b.appliesTo(typ, name) {
			continue
		}
		covered = true
		if !b.forPrincipal(principal, host) || !b.grants(op) {
			continue
		}
		if b.Permission == kmsg.ACLPermissionTypeDeny {
			return Denied
		}
		allowed = true
	}
	switch {
	case allowed:
		return Allowed
	case covered:
		return Denied
	}
	return NoACLs
}

// Validate is CreateAcls' check of a new binding: nil, or what makes it
// INVALID_REQUEST.
func Validate(b Binding) error {
	if msg := validBinding(b); msg != "" {
		return errors.New(msg)
	}
	return nil
}

// ValidateFilter is DescribeAcls' and DeleteAcls' check of a filter.
func ValidateFilter(f Filter) error {
	if msg := validFilter(f); msg != "" {
		return errors.New(msg)
	}
	return nil
}
