package node

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/authmeta"
)

// The admin API's ACL endpoints over the controller's security metadata
// (the coordinator node's; the others answer 404 through servedIf).

func (b *adminBackend) authMeta() (*authmeta.State, error) {
	if b.auth == nil || !b.auth.Attached() {
		return nil, fmt.Errorf("no controller on this node")
	}
	if !b.auth.Authorizing() {
		// As Kafka's ACL APIs without an authorizer (SECURITY_DISABLED).
		return nil, fmt.Errorf("%w: security is disabled: no authorizer is configured (ACLs need the cluster file's security section, up --secure)", admin.ErrConflict)
	}
	return b.auth, nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", admin.ErrInvalid, fmt.Sprintf(format, args...))
}

// aclFilter parses an admin filter: empty fields are ANY (a name,
// principal or host: any).
func aclFilter(f admin.ACLFilter) (authmeta.Filter, error) {
	out := authmeta.Filter{ResourceType: kmsg.ACLResourceTypeAny, Pattern: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	var err error
	if f.ResourceType != "" {
		if out.ResourceType, err = kmsg.ParseACLResourceType(f.ResourceType); err != nil {
			return out, invalid("resource type %q", f.ResourceType)
		}
	}
	if f.PatternType != "" {
		if out.Pattern, err = kmsg.ParseACLResourcePatternType(f.PatternType); err != nil {
			return out, invalid("pattern type %q", f.PatternType)
		}
	}
	if f.Operation != "" {
		if out.Operation, err = kmsg.ParseACLOperation(f.Operation); err != nil {
			return out, invalid("operation %q", f.Operation)
		}
	}
	if f.Permission != "" {
		if out.Permission, err = kmsg.ParseACLPermissionType(f.Permission); err != nil {
			return out, invalid("permission %q", f.Permission)
		}
	}
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	out.Name, out.Principal, out.Host = str(f.ResourceName), str(f.Principal), str(f.Host)
	if err := authmeta.ValidateFilter(out); err != nil {
		return out, invalid("%v", err)
	}
	return out, nil
}

func adminACL(b authmeta.Binding) admin.ACL {
	return admin.ACL{ResourceType: b.ResourceType.String(), ResourceName: b.Name, PatternType: b.Pattern.String(),
		Principal: b.Principal, Host: b.Host, Operation: b.Operation.String(), Permission: b.Permission.String()}
}

func (b *adminBackend) ACLs(_ context.Context, f admin.ACLFilter) ([]admin.ACL, error) {
	st, err := b.authMeta()
	if err != nil {
		return nil, err
	}
	filter, err := aclFilter(f)
	if err != nil {
		return nil, err
	}
	var out []admin.ACL
	for _, acl := range st.ACLs() {
		if filter.Matches(acl) {
			out = append(out, adminACL(acl))
		}
	}
	return out, nil
}

func (b *adminBackend) CreateACLs(_ context.Context, acls []admin.ACL) error {
	st, err := b.authMeta()
	if err != nil {
		return err
	}
	var bs []authmeta.Binding
	for i, a := range acls {
		f, err := aclFilter(admin.ACLFilter(a))
		if err != nil {
			return fmt.Errorf("ACL %d: %w", i, err)
		}
		binding := authmeta.Binding{ResourceType: f.ResourceType, Name: a.ResourceName, Pattern: f.Pattern,
			Principal: a.Principal, Host: a.Host, Operation: f.Operation, Permission: f.Permission}
		if a.PatternType == "" {
			binding.Pattern = kmsg.ACLResourcePatternTypeLiteral
		}
		if a.Host == "" {
			binding.Host = "*"
		}
		if err := authmeta.Validate(binding); err != nil {
			return invalid("ACL %d: %v", i, err)
		}
		bs = append(bs, binding)
	}
	return st.CreateACLs(bs)
}

func (b *adminBackend) DeleteACLs(_ context.Context, f admin.ACLFilter) ([]admin.ACL, error) {
	st, err := b.authMeta()
	if err != nil {
		return nil, err
	}
	filter, err := aclFilter(f)
	if err != nil {
		return nil, err
	}
	deleted, err := st.DeleteACLs([]authmeta.Filter{filter})
	if err != nil {
		return nil, err
	}
	out := []admin.ACL{}
	for _, acl := range deleted[0] {
		out = append(out, adminACL(acl))
	}
	return out, nil
}
