package node

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/admin"
	"github.com/txncoord/txncoord/authmeta"
	"github.com/txncoord/txncoord/topics"
	"github.com/txncoord/txncoord/wire"
)

// The admin API's ACL endpoints over the controller's security metadata:
// served from it where this process holds the controller, otherwise sent
// to the holder as the Kafka ACL APIs are (DescribeAcls, CreateAcls,
// DeleteAcls through the controller's forward), so that every
// coordinator process's admin API answers what the holder would.

// aclsRemote reaches the controller's holder: forward sends it a Kafka
// request (on the node's inter-node connection, whose principal may do
// anything, as the admin token may), refresh (nil: none needed, the state
// is shared in the process) brings this node's mirror up to a change.
type aclsRemote struct {
	forward topics.ForwardFunc
	refresh func(context.Context) error
}

// aclsRemote is how this coordinator reaches the holder of the
// controller, nil where it always runs it.
func (c *Coordinator) aclsRemote() *aclsRemote {
	if c.ctlForward == nil {
		return nil
	}
	r := &aclsRemote{forward: c.ctlForward}
	if c.follower != nil {
		r.refresh = c.follower.Refresh
	}
	return r
}

// aclsForwardTimeout bounds one forwarded admin ACL request.
const aclsForwardTimeout = 30 * time.Second

// authMeta is the controller's security metadata when this process holds
// it (remote nil), or, elsewhere, the way to its holder (st nil).
func (b *adminBackend) authMeta() (st *authmeta.State, remote *aclsRemote, err error) {
	if b.auth == nil || !b.auth.Attached() && b.aclsRemote == nil {
		return nil, nil, fmt.Errorf("no controller on this node")
	}
	if !b.auth.Authorizing() {
		// As Kafka's ACL APIs without an authorizer (SECURITY_DISABLED).
		return nil, nil, errNoAuthorizer
	}
	if b.auth.Attached() {
		return b.auth, nil, nil
	}
	return nil, b.aclsRemote, nil
}

var errNoAuthorizer = fmt.Errorf("%w: security is disabled: no authorizer is configured (ACLs need the cluster file's security section, up --secure)", admin.ErrConflict)

// do sends req to the holder of the controller.
func (r *aclsRemote) do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, aclsForwardTimeout)
	defer cancel()
	req.SetVersion(2) // pattern types (v1+), flexible
	resp, err := r.forward(ctx, &wire.Request{Body: req, Key: req.Key(), Version: req.GetVersion()})
	if err == nil && (resp == nil || resp.Key() != req.Key()) {
		err = fmt.Errorf("an answer of another API")
	}
	if err != nil {
		return nil, fmt.Errorf("cannot reach the controller: %w", err)
	}
	return resp, nil
}

// synced brings this node's mirror up to a change the holder made (best
// effort: the change is made; the mirror catches up at its next sync).
func (r *aclsRemote) synced(ctx context.Context) {
	if r.refresh != nil {
		r.refresh(ctx)
	}
}

// aclError is the admin error of a Kafka ACL error code from the holder
// (nil for none).
func aclError(code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	text := kerr.ErrorForCode(code).Error()
	if msg != nil && *msg != "" {
		text += ": " + *msg
	}
	switch code {
	case kerr.SecurityDisabled.Code:
		return errNoAuthorizer
	case kerr.InvalidRequest.Code:
		return invalid("%s", text)
	}
	return fmt.Errorf("the controller: %s", text)
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

// ACLs lists what f matches as DescribeAcls does: grouped by resource
// pattern, in the order they were created, on every node alike.
func (b *adminBackend) ACLs(ctx context.Context, f admin.ACLFilter) ([]admin.ACL, error) {
	st, remote, err := b.authMeta()
	if err != nil {
		return nil, err
	}
	filter, err := aclFilter(f)
	if err != nil {
		return nil, err
	}
	if remote != nil {
		return remote.describe(ctx, filter)
	}
	return describedACLs(st.ACLs(), filter), nil
}

// describedACLs is what filter matches of acls, grouped by resource
// pattern in the order of each pattern's first binding.
func describedACLs(acls []authmeta.Binding, filter authmeta.Filter) []admin.ACL {
	type pattern struct {
		typ     kmsg.ACLResourceType
		name    string
		pattern kmsg.ACLResourcePatternType
	}
	var order []pattern
	by := map[pattern][]admin.ACL{}
	for _, acl := range acls {
		if !filter.Matches(acl) {
			continue
		}
		p := pattern{acl.ResourceType, acl.Name, acl.Pattern}
		if _, ok := by[p]; !ok {
			order = append(order, p)
		}
		by[p] = append(by[p], adminACL(acl))
	}
	var out []admin.ACL
	for _, p := range order {
		out = append(out, by[p]...)
	}
	return out
}

func (r *aclsRemote) describe(ctx context.Context, f authmeta.Filter) ([]admin.ACL, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = f.ResourceType, f.Name, f.Pattern
	req.Principal, req.Host, req.Operation, req.PermissionType = f.Principal, f.Host, f.Operation, f.Permission
	raw, err := r.do(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := raw.(*kmsg.DescribeACLsResponse)
	if err := aclError(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	var out []admin.ACL
	for _, res := range resp.Resources {
		for _, a := range res.ACLs {
			out = append(out, adminACL(authmeta.Binding{ResourceType: res.ResourceType, Name: res.ResourceName, Pattern: res.ResourcePatternType,
				Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.PermissionType}))
		}
	}
	return out, nil
}

func (b *adminBackend) CreateACLs(ctx context.Context, acls []admin.ACL) error {
	st, remote, err := b.authMeta()
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
	if remote != nil {
		return remote.create(ctx, bs)
	}
	return st.CreateACLs(bs)
}

func (r *aclsRemote) create(ctx context.Context, bs []authmeta.Binding) error {
	if len(bs) == 0 {
		return nil
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bs {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = b.ResourceType, b.Name, b.Pattern
		c.Principal, c.Host, c.Operation, c.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		req.Creations = append(req.Creations, c)
	}
	raw, err := r.do(ctx, req)
	if err != nil {
		return err
	}
	resp := raw.(*kmsg.CreateACLsResponse)
	if len(resp.Results) != len(bs) {
		return fmt.Errorf("the controller answered %d of %d creations", len(resp.Results), len(bs))
	}
	for i, res := range resp.Results {
		if err := aclError(res.ErrorCode, res.ErrorMessage); err != nil {
			return fmt.Errorf("ACL %d: %w", i, err)
		}
	}
	r.synced(ctx)
	return nil
}

func (b *adminBackend) DeleteACLs(ctx context.Context, f admin.ACLFilter) ([]admin.ACL, error) {
	st, remote, err := b.authMeta()
	if err != nil {
		return nil, err
	}
	filter, err := aclFilter(f)
	if err != nil {
		return nil, err
	}
	if remote != nil {
		return remote.delete(ctx, filter)
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

func (r *aclsRemote) delete(ctx context.Context, f authmeta.Filter) ([]admin.ACL, error) {
	req := kmsg.NewPtrDeleteACLsRequest()
	rf := kmsg.NewDeleteACLsRequestFilter()
	rf.ResourceType, rf.ResourceName, rf.ResourcePatternType = f.ResourceType, f.Name, f.Pattern
	rf.Principal, rf.Host, rf.Operation, rf.PermissionType = f.Principal, f.Host, f.Operation, f.Permission
	req.Filters = append(req.Filters, rf)
	raw, err := r.do(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := raw.(*kmsg.DeleteACLsResponse)
	if len(resp.Results) != 1 {
		return nil, fmt.Errorf("the controller answered %d results for one filter", len(resp.Results))
	}
	res := resp.Results[0]
	if err := aclError(res.ErrorCode, res.ErrorMessage); err != nil {
		return nil, err
	}
	out := []admin.ACL{}
	for _, m := range res.MatchingACLs {
		out = append(out, adminACL(authmeta.Binding{ResourceType: m.ResourceType, Name: m.ResourceName, Pattern: m.ResourcePatternType,
			Principal: m.Principal, Host: m.Host, Operation: m.Operation, Permission: m.PermissionType}))
	}
	r.synced(ctx)
	return out, nil
}
