package authmeta

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"hash"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// Authorizer is base with the ACLs of s in front: super users may do
// anything, an ACL decision (allow, deny) stands, and a resource without
// ACLs is base's to decide.
func (s *State) Authorizer(base wire.Authorizer, superUsers []string) wire.Authorizer {
	s.authorizing.Store(true)
	a := &authorizer{s: s, base: base, super: map[string]bool{}}
	for _, u := range superUsers {
		a.super[u] = true
	}
	return a
}

type authorizer struct {
	s     *State
	base  wire.Authorizer
	super map[string]bool
}

var _ wire.HostAuthorizer = (*authorizer)(nil)

func (a *authorizer) Authorize(principal string, op kmsg.ACLOperation, res wire.Resource) bool {
	return a.AuthorizeFrom(principal, "", op, res)
}

func (a *authorizer) AuthorizeFrom(principal, host string, op kmsg.ACLOperation, res wire.Resource) bool {
	if a.super[principal] {
		return true
	}
	switch decide(a.s.ACLs(), principal, host, op, res.Type, res.Name) {
	case Allowed:
		return true
	case Denied:
		return false
	}
	return a.base.Authorize(principal, op, res)
}

// Authorizing reports whether the ACLs are enforced: whether the
// listeners of this process authorize with them.
func (s *State) Authorizing() bool { return s.authorizing.Load() }

// SCRAM mechanisms as AlterUserScramCredentials numbers them.
const (
	mechSHA256 byte = 1
	mechSHA512 byte = 2
)

func mechByte(name string) byte {
	switch name {
	case wire.MechanismSCRAMSHA256:
		return mechSHA256
	case wire.MechanismSCRAMSHA512:
		return mechSHA512
	}
	return 0
}

func mechHash(m byte) func() hash.Hash {
	if m == mechSHA256 {
		return sha256.New
	}
	return sha512.New
}

// Credentials is base with the stored SCRAM credentials in front: a user
// created or changed by AlterUserScramCredentials logs in with its new
// password at once; PLAIN stays base's (Kafka's PLAIN does not read SCRAM
// credentials either).
func (s *State) Credentials(base wire.Credentials) wire.Credentials {
	return &credentials{s: s, base: base}
}

type credentials struct {
	s    *State
	base wire.Credentials
}

func (c *credentials) SCRAM(mechanism, user string) (wire.ScramCredentials, bool) {
	if cred, ok := c.s.scramOf(mechByte(mechanism), user); ok {
		return cred, true
	}
	if c.base == nil {
		return wire.ScramCredentials{}, false
	}
	return c.base.SCRAM(mechanism, user)
}

func (c *credentials) VerifyPlain(user, password string) bool {
	return c.base != nil && c.base.VerifyPlain(user, password)
}

// storedFrom derives RFC 5802's StoredKey and ServerKey from the salted
// password a client sends (Kafka's ScramFormatter).
func storedFrom(m byte, salted, salt []byte, iterations int32) wire.ScramCredentials {
	h := mechHash(m)
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	sum := h()
	sum.Write(clientKey)
	return wire.ScramCredentials{
		Salt: append([]byte(nil), salt...), Iterations: int(iterations),
		StoredKey: sum.Sum(nil), ServerKey: mac(salted, "Server Key"),
	}
}
