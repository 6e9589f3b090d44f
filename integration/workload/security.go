package workload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/IBM/sarama"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xdgscram "github.com/xdg-go/scram"
)

// SASL mechanisms a Security may name.
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
	defaultSASLMechanism = MechanismSCRAMSHA512
)

// Security is how a driver (and ReadCommittedSecure) reaches a secured
// listener: TLS, with the server's certificate verified against CAFile, and
// SASL as User. Every client library verifies the certificate and the host
// name; none is told to skip it.
type Security struct {
	// CAFile is the PEM CA the servers' certificates chain to.
	CAFile string
	// User and Password are the SASL credentials.
	User, Password string
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (the default).
	Mechanism string
}

// mechanism validates s and returns its mechanism, defaulted.
func (s *Security) mechanism() (string, error) {
	if s.CAFile == "" {
		return "", errors.New("workload: security without a CA file")
	}
	if s.User == "" {
		return "", errors.New("workload: security without a SASL user")
	}
	switch m := s.Mechanism; m {
	case "":
		return defaultSASLMechanism, nil
	case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		return m, nil
	default:
		return "", fmt.Errorf("workload: unsupported SASL mechanism %q", m)
	}
}

func (s *Security) tlsConfig() (*tls.Config, error) {
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		return nil, fmt.Errorf("workload: CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("workload: CA %s: no PEM certificate", s.CAFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// kgoOpts are the franz-go options for s (none when s is nil).
func (s *Security) kgoOpts() ([]kgo.Opt, error) {
	if s == nil {
		return nil, nil
	}
	mech, err := s.mechanism()
	if err != nil {
		return nil, err
	}
	tlsCfg, err := s.tlsConfig()
	if err != nil {
		return nil, err
	}
	var m sasl.Mechanism
	switch mech {
	case MechanismPlain:
		m = plain.Auth{User: s.User, Pass: s.Password}.AsMechanism()
	case MechanismSCRAMSHA256:
		m = scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism()
	default:
		m = scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()
	}
	// kgo sets the TLS ServerName from each broker's host (a clone of
	// tlsCfg per dial), so the certificate's IP SAN is checked.
	return []kgo.Opt{kgo.DialTLSConfig(tlsCfg), kgo.SASL(m)}, nil
}

// applySarama sets TLS and SASL on a sarama config (nothing when s is nil).
func (s *Security) applySarama(c *sarama.Config) error {
	if s == nil {
		return nil
	}
	mech, err := s.mechanism()
	if err != nil {
		return err
	}
	tlsCfg, err := s.tlsConfig()
	if err != nil {
		return err
	}
	// sarama sets ServerName from each broker's host on a copy of
	// tlsCfg (validServerNameTLS), so the IP SAN is checked.
	c.Net.TLS.Enable = true
	c.Net.TLS.Config = tlsCfg
	c.Net.SASL.Enable = true
	c.Net.SASL.Handshake = true
	c.Net.SASL.User = s.User
	c.Net.SASL.Password = s.Password
	switch mech {
	case MechanismPlain:
		c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	case MechanismSCRAMSHA256:
		c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{hash: xdgscram.SHA256} }
	default:
		c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{hash: xdgscram.SHA512} }
	}
	return nil
}

// saramaSCRAM is sarama's SCRAM client over xdg-go/scram (sarama ships the
// interface only).
type saramaSCRAM struct {
	hash xdgscram.HashGeneratorFcn
	conv *xdgscram.ClientConversation
}

func (x *saramaSCRAM) Begin(user, password, authzID string) error {
	cl, err := x.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	x.conv = cl.NewConversation()
	return nil
}

// Step fails when the server's final message does not prove it knows the
// password (xdg-go checks the server signature).
func (x *saramaSCRAM) Step(challenge string) (string, error) { return x.conv.Step(challenge) }

func (x *saramaSCRAM) Done() bool { return x.conv.Done() }

// applyConfluent sets librdkafka's TLS and SASL properties (nothing when s
// is nil).
func (s *Security) applyConfluent(m kafka.ConfigMap) error {
	if s == nil {
		return nil
	}
	mech, err := s.mechanism()
	if err != nil {
		return err
	}
	m["security.protocol"] = "SASL_SSL"
	m["sasl.mechanisms"] = mech
	m["sasl.username"] = s.User
	m["sasl.password"] = s.Password
	m["ssl.ca.location"] = s.CAFile
	// librdkafka's default since 2.0, set so it cannot silently change:
	// the broker's host is checked against the certificate. With the
	// bundled OpenSSL 3 an IP literal such as 127.0.0.1 is matched
	// against the IP SANs (a certificate without that SAN fails the
	// handshake with "certificate verify failed").
	m["ssl.endpoint.identification.algorithm"] = "https"
	return nil
}
