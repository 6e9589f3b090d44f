package security

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdg-go/scram"

	"github.com/txncoord/txncoord/wire"
)

// AddUser stores salted hashes only; PLAIN verification derives them from
// the password; the stored SCRAM credentials are exactly what an
// independent SCRAM implementation (xdg-go's client) derives, for both
// hashes, so SCRAM clients can prove the password.
func TestAddUserStoresHashesOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "credentials.yaml")
	const password = "s3cret-Pässword"
	if err := AddUser(path, "alice", password); err != nil {
		t.Fatal(err)
	}
	if err := AddUser(path, "bob", "other"); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), password) || strings.Contains(string(raw), "other") {
		t.Fatal("a password is stored in the credentials file")
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file mode %v, want 0600", st.Mode().Perm())
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.UserNames(); strings.Join(got, ",") != "alice,bob" {
		t.Fatalf("users %v", got)
	}
	if !c.VerifyPlain("alice", password) || c.VerifyPlain("alice", "wrong") || c.VerifyPlain("alice", "other") || c.VerifyPlain("carol", password) {
		t.Fatal("VerifyPlain accepts or refuses the wrong passwords")
	}
	for _, tc := range []struct {
		mech string
		hash scram.HashGeneratorFcn
	}{{wire.MechanismSCRAMSHA256, scram.SHA256}, {wire.MechanismSCRAMSHA512, scram.SHA512}} {
		stored, ok := c.SCRAM(tc.mech, "alice")
		if !ok || stored.Iterations != DefaultIterations || len(stored.Salt) != 32 {
			t.Fatalf("%s: %+v %v", tc.mech, stored, ok)
		}
		client, err := tc.hash.NewClientUnprepped("alice", password, "")
		if err != nil {
			t.Fatal(err)
		}
		want, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(stored.Salt), Iters: stored.Iterations})
		if err != nil {
			t.Fatal(err)
		}
		if string(want.StoredKey) != string(stored.StoredKey) || string(want.ServerKey) != string(stored.ServerKey) {
			t.Fatalf("%s: stored keys differ from xdg-go's derivation", tc.mech)
		}
	}
	if _, ok := c.SCRAM(wire.MechanismSCRAMSHA512, "carol"); ok {
		t.Fatal("unknown user has credentials")
	}
	// Replacing a password invalidates the old one.
	if err := AddUser(path, "alice", "new"); err != nil {
		t.Fatal(err)
	}
	if c, err = Load(path); err != nil || c.VerifyPlain("alice", password) || !c.VerifyPlain("alice", "new") {
		t.Fatalf("after a password change: %v", err)
	}
	if err := AddUser(path, "a,b", "x"); err == nil {
		t.Fatal("a user name with a comma was accepted")
	}
}

// GenerateLocal makes a CA whose node certificate serves 127.0.0.1 and
// localhost and whose client certificate verifies as a client; a second
// call reuses everything; a partial directory is refused.
func TestGenerateLocal(t *testing.T) {
	dir := t.TempDir()
	l, err := GenerateLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(l.CAFile)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA file holds no certificate")
	}
	node, err := tls.LoadX509KeyPair(l.NodeCertFile, l.NodeKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	nodeCert, _ := x509.ParseCertificate(node.Certificate[0])
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		if _, err := nodeCert.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Fatalf("node certificate for %s: %v", host, err)
		}
	}
	client, err := tls.LoadX509KeyPair(l.ClientCertFile, l.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, _ := x509.ParseCertificate(client.Certificate[0])
	if _, err := clientCert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil || clientCert.Subject.CommonName != LocalClientUser {
		t.Fatalf("client certificate: %v, CN %q", err, clientCert.Subject.CommonName)
	}
	for _, secret := range []string{l.CAKeyFile, l.NodeKeyFile, l.ClientKeyFile, l.ClusterPasswordFile, l.ClientPasswordFile, l.AdminTokenFile, l.CredentialsFile} {
		if st, _ := os.Stat(secret); st.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v, want 0600", secret, st.Mode().Perm())
		}
	}
	creds, err := Load(l.CredentialsFile)
	if err != nil {
		t.Fatal(err)
	}
	if creds.ClusterPrincipal != "User:"+LocalClusterUser || !creds.VerifyPlain(LocalClientUser, l.ClientPassword) {
		t.Fatalf("credentials: principal %q", creds.ClusterPrincipal)
	}
	sc, err := l.Settings.Server()
	if err != nil || sc.TLS == nil || sc.SASL == nil || sc.Authorizer == nil {
		t.Fatalf("Settings.Server: %+v, %v", sc, err)
	}
	text := l.HowToConnect("127.0.0.1:9092", "http://127.0.0.1:9644")
	for _, want := range []string{"kgo.DialTLSConfig", "AsSha512Mechanism()", l.ClientPasswordFile, "127.0.0.1:9092", l.CAFile} {
		if !strings.Contains(text, want) {
			t.Fatalf("HowToConnect lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, l.ClientPassword) || strings.Contains(text, l.AdminToken) {
		t.Fatalf("HowToConnect prints a secret:\n%s", text)
	}

	again, err := GenerateLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	caAgain, _ := os.ReadFile(again.CAFile)
	if string(caAgain) != string(caPEM) || again.ClientPassword != l.ClientPassword || again.AdminToken != l.AdminToken {
		t.Fatal("a second GenerateLocal did not reuse the first one's files")
	}
	os.Remove(l.ClientKeyFile)
	if _, err := GenerateLocal(dir); err == nil {
		t.Fatal("a partial directory was accepted")
	}
}

// Settings refuse a cluster user that contradicts the credentials file,
// and SASL without the cluster user's password for inter-node dialing.
func TestSettingsErrors(t *testing.T) {
	l, err := GenerateLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := *l.Settings
	s.ClusterUser = "someone-else"
	if _, err := s.Server(); err == nil || !strings.Contains(err.Error(), "cluster_principal") {
		t.Fatalf("mismatched cluster user: %v", err)
	}
	s = *l.Settings
	s.ClusterPasswordFile = ""
	if _, err := s.Dial(); err == nil {
		t.Fatal("SASL dialing without a cluster password was accepted")
	}
	var none *Settings
	if sc, err := none.Server(); sc != nil || err != nil {
		t.Fatalf("nil settings: %v %v", sc, err)
	}
	// Relative paths resolve against Dir.
	rel := &Settings{Dir: l.Dir, TLS: &TLSSettings{CertFile: "node.crt", KeyFile: "node.key", CAFile: "ca.crt"}, ClusterUser: LocalClusterUser}
	if sc, err := rel.Server(); err != nil || sc.TLS.ClientAuth != tls.VerifyClientCertIfGiven {
		t.Fatalf("relative settings: %v", err)
	}
}

// The admin API without the token answers 401; open paths stay open.
func TestRequireBearer(t *testing.T) {
	h := RequireBearer("tok", []string{"/metrics", "/healthz"}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/v1/transactions", "", 401},
		{"/v1/transactions", "Bearer wrong", 401},
		{"/v1/transactions", "Bearer tok", 200},
		{"/v1/transactions/x/abort", "tok", 401},
		{"/metrics", "", 200},
		{"/healthz", "", 200},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s with %q: %d, want %d", tc.path, tc.auth, rec.Code, tc.want)
		}
	}
}
