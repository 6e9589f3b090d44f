package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Names GenerateLocal uses.
const (
	LocalClusterUser = "txncoord-cluster"
	LocalClientUser  = "client"
)

// Local is what GenerateLocal made (or found) under its directory. Every
// path is absolute.
type Local struct {
	Dir                           string
	CAFile, CAKeyFile             string
	NodeCertFile, NodeKeyFile     string // CN txncoord-cluster, SANs 127.0.0.1, ::1, localhost
	ClientCertFile, ClientKeyFile string // CN client
	CredentialsFile               string // SCRAM hashes of txncoord-cluster and client
	ClusterPasswordFile           string
	ClientPasswordFile            string
	AdminTokenFile                string
	ClientUser, ClientPassword    string
	AdminToken                    string
	// Settings is the cluster file's security section for these files:
	// TLS (client certificates optional), SASL with all mechanisms, the
	// cluster user, the admin token, /metrics and /healthz open.
	Settings *Settings
}

// GenerateLocal makes, under dir, a local CA, a node certificate for
// 127.0.0.1/localhost, a client certificate, a credentials file with the
// cluster user and a client user (random passwords, stored hashed; the
// passwords themselves in 0600 files so that nodes and the person trying it
// can use them) and an admin bearer token. Files that already exist from an
// earlier run are reused, so clients keep trusting the same CA across
// restarts of `up --secure`. Not for production: the CA key stays on disk.
func GenerateLocal(dir string) (*Local, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	l := &Local{
		Dir: dir, CAFile: p("ca.crt"), CAKeyFile: p("ca.key"),
		NodeCertFile: p("node.crt"), NodeKeyFile: p("node.key"),
		ClientCertFile: p("client.crt"), ClientKeyFile: p("client.key"),
		CredentialsFile: p("credentials.yaml"), ClusterPasswordFile: p("cluster.password"),
		ClientPasswordFile: p("client.password"), AdminTokenFile: p("admin.token"),
		ClientUser: LocalClientUser,
	}
	all := []string{l.CAFile, l.CAKeyFile, l.NodeCertFile, l.NodeKeyFile, l.ClientCertFile, l.ClientKeyFile,
		l.CredentialsFile, l.ClusterPasswordFile, l.ClientPasswordFile, l.AdminTokenFile}
	present := 0
	for _, f := range all {
		if _, err := os.Stat(f); err == nil {
			present++
		}
	}
	switch present {
	case len(all):
	case 0:
		if err := l.generate(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("security: %s holds only some of the generated files; remove it to start over", dir)
	}
	if l.ClientPassword, err = readSecret(l.ClientPasswordFile); err != nil {
		return nil, err
	}
	if l.AdminToken, err = readSecret(l.AdminTokenFile); err != nil {
		return nil, err
	}
	l.Settings = &Settings{
		Dir:                 dir,
		TLS:                 &TLSSettings{CertFile: l.NodeCertFile, KeyFile: l.NodeKeyFile, CAFile: l.CAFile, ClientAuth: "optional"},
		SASL:                &SASLSettings{CredentialsFile: l.CredentialsFile},
		ClusterUser:         LocalClusterUser,
		ClusterPasswordFile: l.ClusterPasswordFile,
		AdminTokenFile:      l.AdminTokenFile,
		OpenMetrics:         true,
	}
	return l, nil
}

func (l *Local) generate() error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour) // tolerate small clock skew
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "txncoord local CA"},
		NotBefore: now, NotAfter: now.AddDate(10, 0, 0),
		IsCA: true, BasicConstraintsValid: true, MaxPathLen: 0, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writePEM(l.CAFile, "CERTIFICATE", caDER, 0o644); err != nil {
		return err
	}
	if err := writeKey(l.CAKeyFile, caKey); err != nil {
		return err
	}
	leaf := func(cn string, usage []x509.ExtKeyUsage, hosts bool, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
			NotBefore: now, NotAfter: now.AddDate(2, 0, 0),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
		}
		if hosts {
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
			tmpl.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		if err := writePEM(certFile, "CERTIFICATE", der, 0o644); err != nil {
			return err
		}
		return writeKey(keyFile, key)
	}
	// The node certificate is also the nodes' client certificate: its CN
	// is the cluster user, so mTLS alone identifies a node.
	if err := leaf(LocalClusterUser, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, true, l.NodeCertFile, l.NodeKeyFile); err != nil {
		return err
	}
	if err := leaf(LocalClientUser, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false, l.ClientCertFile, l.ClientKeyFile); err != nil {
		return err
	}
	clusterPass, clientPass, token := randomSecret(), randomSecret(), randomSecret()
	creds := &Credentials{ClusterPrincipal: "User:" + LocalClusterUser}
	if err := creds.SetPassword(LocalClusterUser, clusterPass); err != nil {
		return err
	}
	if err := creds.SetPassword(LocalClientUser, clientPass); err != nil {
		return err
	}
	for _, f := range []struct{ path, secret string }{
		{l.ClusterPasswordFile, clusterPass}, {l.ClientPasswordFile, clientPass}, {l.AdminTokenFile, token},
	} {
		if err := writeFileAtomic(f.path, []byte(f.secret+"\n"), 0o600); err != nil {
			return err
		}
	}
	// Written last: its presence marks a complete generation.
	return creds.Save(l.CredentialsFile)
}

// HowToConnect is the text `up --secure` prints: how a client reaches the
// secured listener at bootstrap. It names the files that hold the secrets
// (0600, under Dir) and never prints a secret itself: the text goes to a
// terminal or a log that others may read.
func (l *Local) HowToConnect(bootstrap, adminURL string) string {
	r := strings.NewReplacer("BOOTSTRAP", bootstrap, "ADMIN", adminURL, "DIR", l.Dir, "USER", l.ClientUser)
	return r.Replace(`txncoord secure listener: TLS (CA DIR/ca.crt) + SASL PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512
  user USER, password in DIR/client.password (readable only by you); client certificate DIR/client.crt + DIR/client.key (optional)
Go, franz-go (imports: crypto/tls, crypto/x509, os, strings, kgo, github.com/twmb/franz-go/pkg/sasl/scram):
  caPEM, _ := os.ReadFile("DIR/ca.crt")
  pool := x509.NewCertPool()
  pool.AppendCertsFromPEM(caPEM)
  pass, _ := os.ReadFile("DIR/client.password")
  cl, err := kgo.NewClient(
      kgo.SeedBrokers("BOOTSTRAP"),
      kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
      kgo.SASL(scram.Auth{User: "USER", Pass: strings.TrimSpace(string(pass))}.AsSha512Mechanism()),
      kgo.TransactionalID("my-txn"),
  )
kcat / librdkafka: -X security.protocol=SASL_SSL -X sasl.mechanisms=PLAIN -X sasl.username=USER -X sasl.password="$(cat DIR/client.password)" -X ssl.ca.location=DIR/ca.crt
  (PLAIN over TLS: librdkafka before 2.6.1, Debian 12's kcat among its users, fails SCRAM with "nonce received did not match nonce sent"; with 2.6.1 or later sasl.mechanisms=SCRAM-SHA-512 works too)
admin API: curl -H "Authorization: Bearer $(cat DIR/admin.token)" ADMIN/v1/transactions
`)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

func randomSecret() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}
