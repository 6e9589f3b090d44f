package security

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/txncoord/txncoord/wire"
)

// Settings is the `security:` section of the cluster file. Relative paths
// are relative to Dir (the cluster file's directory; set it after
// loading). Every node of a cluster uses the same section.
//
//	security:
//	  tls: {cert_file: node.crt, key_file: node.key, ca_file: ca.crt, client_auth: optional}
//	  sasl: {mechanisms: [PLAIN, SCRAM-SHA-256, SCRAM-SHA-512], credentials_file: credentials.yaml}
//	  cluster_user: txncoord-cluster
//	  cluster_password_file: cluster.password
//	  cluster_mechanism: SCRAM-SHA-512
//	  admin_token_file: admin.token
//	  open_metrics: true
type Settings struct {
	Dir  string        `yaml:"-"`
	TLS  *TLSSettings  `yaml:"tls,omitempty"`
	SASL *SASLSettings `yaml:"sasl,omitempty"`
	// ClusterUser is the SASL user (and principal User:<ClusterUser>)
	// nodes authenticate as to each other: the marker sender to leaders,
	// leaders to the coordinator.
	ClusterUser         string `yaml:"cluster_user,omitempty"`
	ClusterPasswordFile string `yaml:"cluster_password_file,omitempty"`
	// ClusterMechanism defaults to SCRAM-SHA-512.
	ClusterMechanism string `yaml:"cluster_mechanism,omitempty"`
	// AdminTokenFile holds the admin API's bearer token.
	AdminTokenFile string `yaml:"admin_token_file,omitempty"`
	// OpenMetrics leaves /metrics, /healthz and /readyz without a token.
	OpenMetrics bool `yaml:"open_metrics,omitempty"`
	// SuperUsers are principals (User:NAME) that ACLs never restrict and
	// that may administer ACLs and SCRAM credentials, as Kafka's
	// super.users; the cluster principal always is one.
	SuperUsers []string `yaml:"super_users,omitempty"`
}

// TLSSettings are PEM files. CAFile verifies client certificates on the
// server side and servers on the dialing side.
type TLSSettings struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	CAFile   string `yaml:"ca_file,omitempty"`
	// ClientAuth: "none" (default when no CA), "optional" (verified when
	// given; default with a CA) or "required" (mTLS).
	ClientAuth string `yaml:"client_auth,omitempty"`
}

// SASLSettings enable SASL with users from a credentials file.
type SASLSettings struct {
	Mechanisms      []string `yaml:"mechanisms,omitempty"`
	CredentialsFile string   `yaml:"credentials_file"`
}

func (s *Settings) path(p string) string {
	if p == "" || filepath.IsAbs(p) || s.Dir == "" {
		return p
	}
	return filepath.Join(s.Dir, p)
}

// Server builds a listener's wire.SecurityConfig (nil when s is nil). The
// authorizer comes from the credentials file; without SASL it only knows
// the cluster principal from a client certificate whose CN is ClusterUser.
func (s *Settings) Server() (*wire.SecurityConfig, error) {
	if s == nil {
		return nil, nil
	}
	sc := &wire.SecurityConfig{}
	if t := s.TLS; t != nil {
		ca := ""
		if t.ClientAuth != "none" {
			ca = s.path(t.CAFile)
		}
		var err error
		if sc.TLS, err = ServerTLS(s.path(t.CertFile), s.path(t.KeyFile), ca, t.ClientAuth == "required"); err != nil {
			return nil, err
		}
	}
	creds := &Credentials{}
	if s.SASL != nil {
		var err error
		if creds, err = Load(s.path(s.SASL.CredentialsFile)); err != nil {
			return nil, err
		}
		sc.SASL = &wire.SASLConfig{Mechanisms: s.SASL.Mechanisms, Credentials: creds}
	}
	if s.ClusterUser != "" {
		want := "User:" + s.ClusterUser
		if creds.ClusterPrincipal != "" && creds.ClusterPrincipal != want {
			return nil, fmt.Errorf("security: cluster_user %q but the credentials file's cluster_principal is %q", s.ClusterUser, creds.ClusterPrincipal)
		}
		creds.ClusterPrincipal = want
	}
	if creds.ClusterPrincipal == "" {
		return nil, errors.New("security: no cluster principal (cluster_user or the credentials file's cluster_principal)")
	}
	sc.Authorizer = creds.Authorizer()
	sc.SuperUsers = append([]string{creds.ClusterPrincipal}, s.SuperUsers...)
	return sc, nil
}

// Dial builds the wire.DialConfig for inter-node connections: TLS against
// the CA (presenting the node certificate, whose CN may be the cluster
// user) and SASL as the cluster user when SASL is on.
func (s *Settings) Dial() (wire.DialConfig, error) {
	var dc wire.DialConfig
	if s == nil {
		return dc, nil
	}
	if t := s.TLS; t != nil {
		var err error
		if dc.TLS, err = ClientTLS(s.path(t.CAFile), s.path(t.CertFile), s.path(t.KeyFile)); err != nil {
			return dc, err
		}
	}
	if s.SASL != nil {
		if s.ClusterUser == "" || s.ClusterPasswordFile == "" {
			return dc, errors.New("security: SASL on but no cluster_user / cluster_password_file for inter-node connections")
		}
		pass, err := readSecret(s.path(s.ClusterPasswordFile))
		if err != nil {
			return dc, err
		}
		mech := s.ClusterMechanism
		if mech == "" {
			mech = wire.MechanismSCRAMSHA512
		}
		dc.SASL = &wire.ClientSASL{Mechanism: mech, User: s.ClusterUser, Pass: pass}
	}
	return dc, nil
}

// AdminToken reads the admin API's bearer token ("" when none is set).
func (s *Settings) AdminToken() (string, error) {
	if s == nil || s.AdminTokenFile == "" {
		return "", nil
	}
	return readSecret(s.path(s.AdminTokenFile))
}

// readSecret reads a one-line secret file.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("security: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("security: %s is empty", path)
	}
	return secret, nil
}
