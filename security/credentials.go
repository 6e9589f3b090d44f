package security

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/txncoord/txncoord/wire"
)

// DefaultIterations is the PBKDF2 iteration count of new SCRAM
// credentials: Kafka's default and the minimum franz-go's client accepts.
const DefaultIterations = 4096

// Credentials is the credentials file:
//
//	cluster_principal: User:txncoord-cluster
//	users:
//	  alice:
//	    scram_sha_256: {salt: <base64>, iterations: 4096, stored_key: <base64>, server_key: <base64>}
//	    scram_sha_512: {salt: ..., iterations: 4096, stored_key: ..., server_key: ...}
//	transactional_id_prefixes:
//	  User:alice: [orders-]
//	restrict_transactional_ids: false
//
// It is read-only once loaded, so it is safe for concurrent use.
type Credentials struct {
	// ClusterPrincipal may make broker-only calls (WriteTxnMarkers,
	// AddPartitionsToTxn v4+) and anything else.
	ClusterPrincipal string               `yaml:"cluster_principal"`
	Users            map[string]*UserCred `yaml:"users"`
	// TransactionalIDPrefixes restricts a principal to transactional ids
	// with one of its prefixes.
	TransactionalIDPrefixes map[string][]string `yaml:"transactional_id_prefixes,omitempty"`
	// RestrictTransactionalIDs denies every transactional id to a
	// principal without an entry in TransactionalIDPrefixes (default:
	// such principals may use any id).
	RestrictTransactionalIDs bool `yaml:"restrict_transactional_ids,omitempty"`
}

// UserCred holds one user's salted hashes.
type UserCred struct {
	SHA256 *ScramHash `yaml:"scram_sha_256,omitempty"`
	SHA512 *ScramHash `yaml:"scram_sha_512,omitempty"`
}

// ScramHash is RFC 5802's stored form; byte fields are base64 in YAML.
type ScramHash struct {
	Salt       Base64 `yaml:"salt"`
	Iterations int    `yaml:"iterations"`
	StoredKey  Base64 `yaml:"stored_key"`
	ServerKey  Base64 `yaml:"server_key"`
}

// Base64 is bytes written as a standard base64 string in YAML.
type Base64 []byte

// MarshalYAML implements yaml.Marshaler.
func (b Base64) MarshalYAML() (any, error) { return base64.StdEncoding.EncodeToString(b), nil }

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *Base64) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = raw
	return nil
}

var _ wire.Credentials = (*Credentials)(nil)

// Load reads a credentials file.
func Load(path string) (*Credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c := &Credentials{}
	if err := yaml.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("security: %s: %w", path, err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("security: %s: %w", path, err)
	}
	return c, nil
}

func (c *Credentials) validate() error {
	if c.ClusterPrincipal != "" && !strings.HasPrefix(c.ClusterPrincipal, "User:") {
		return fmt.Errorf("cluster_principal %q: want User:<name>", c.ClusterPrincipal)
	}
	for name, u := range c.Users {
		if u == nil || (u.SHA256 == nil && u.SHA512 == nil) {
			return fmt.Errorf("user %q has no SCRAM credentials", name)
		}
		for _, h := range []*ScramHash{u.SHA256, u.SHA512} {
			if h != nil && (len(h.Salt) == 0 || h.Iterations < DefaultIterations || len(h.StoredKey) == 0 || len(h.ServerKey) == 0) {
				return fmt.Errorf("user %q: incomplete SCRAM credentials (iterations must be >= %d)", name, DefaultIterations)
			}
		}
	}
	return nil
}

// Save writes the file atomically (temp file, fsync, rename), mode 0600.
func (c *Credentials) Save(path string) error {
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	header := []byte("# txncoord credentials: SCRAM salted hashes only (no passwords). Add users with security.AddUser.\n")
	return writeFileAtomic(path, append(header, data...), 0o600)
}

// AddUser adds (or replaces) user with password in the credentials file at
// path, creating the file if needed, with SCRAM-SHA-256 and SCRAM-SHA-512
// hashes under fresh random salts.
func AddUser(path, user, password string) error {
	c, err := Load(path)
	if errors.Is(err, os.ErrNotExist) {
		c, err = &Credentials{}, nil
	}
	if err != nil {
		return err
	}
	if err := c.SetPassword(user, password); err != nil {
		return err
	}
	return c.Save(path)
}

// SetPassword sets user's credentials in memory (see AddUser).
func (c *Credentials) SetPassword(user, password string) error {
	if user == "" || strings.ContainsAny(user, ",=\x00") {
		// SCRAM escapes ',' and '='; keeping names plain avoids
		// principals that differ from what the user typed.
		return fmt.Errorf("security: bad user name %q", user)
	}
	if password == "" {
		return errors.New("security: empty password")
	}
	h256, err := NewScramHash(sha256.New, password, DefaultIterations)
	if err != nil {
		return err
	}
	h512, err := NewScramHash(sha512.New, password, DefaultIterations)
	if err != nil {
		return err
	}
	if c.Users == nil {
		c.Users = make(map[string]*UserCred)
	}
	c.Users[user] = &UserCred{SHA256: h256, SHA512: h512}
	return nil
}

// NewScramHash derives the stored credentials for password with a random
// 32-byte salt. The password is used as given (no SASLprep), as Kafka's
// ScramFormatter and franz-go's client do.
func NewScramHash(newHash func() hash.Hash, password string, iterations int) (*ScramHash, error) {
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	stored, server, err := deriveKeys(newHash, password, salt, iterations)
	if err != nil {
		return nil, err
	}
	return &ScramHash{Salt: salt, Iterations: iterations, StoredKey: stored, ServerKey: server}, nil
}

// deriveKeys computes RFC 5802's StoredKey and ServerKey.
func deriveKeys(newHash func() hash.Hash, password string, salt []byte, iterations int) (stored, server []byte, err error) {
	salted, err := pbkdf2.Key(newHash, password, salt, iterations, newHash().Size())
	if err != nil {
		return nil, nil, err
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(newHash, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	h := newHash()
	h.Write(mac(salted, "Client Key"))
	return h.Sum(nil), mac(salted, "Server Key"), nil
}

// SCRAM implements wire.Credentials.
func (c *Credentials) SCRAM(mechanism, user string) (wire.ScramCredentials, bool) {
	u := c.Users[user]
	if u == nil {
		return wire.ScramCredentials{}, false
	}
	var h *ScramHash
	switch mechanism {
	case wire.MechanismSCRAMSHA256:
		h = u.SHA256
	case wire.MechanismSCRAMSHA512:
		h = u.SHA512
	}
	if h == nil {
		return wire.ScramCredentials{}, false
	}
	return wire.ScramCredentials{Salt: h.Salt, Iterations: h.Iterations, StoredKey: h.StoredKey, ServerKey: h.ServerKey}, true
}

// VerifyPlain implements wire.Credentials: it derives the SCRAM stored key
// from password with the user's salt and compares in constant time, so no
// password is ever stored. It costs one PBKDF2 run (a few ms).
func (c *Credentials) VerifyPlain(user, password string) bool {
	u := c.Users[user]
	if u == nil {
		return false
	}
	newHash, h := sha512.New, u.SHA512
	if h == nil {
		newHash, h = sha256.New, u.SHA256
	}
	stored, _, err := deriveKeys(newHash, password, h.Salt, h.Iterations)
	return err == nil && subtle.ConstantTimeCompare(stored, h.StoredKey) == 1
}

// UserNames returns the users, sorted.
func (c *Credentials) UserNames() []string {
	names := make([]string, 0, len(c.Users))
	for n := range c.Users {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// writeFileAtomic writes data to path through a synced temporary file and
// a rename, then syncs the directory, so a crash leaves the old or the new
// file, never half of one.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
