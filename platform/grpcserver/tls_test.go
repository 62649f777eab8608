package grpcserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/rpcauth"
	"github.com/bmcis/knowledge/platform/tlsconfig"
)

// pki is a CA the test makes, and files of certificates it signed.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caFile string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bmcis test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	p := &pki{dir: t.TempDir(), caCert: cert, caKey: key}
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", der)
	return p
}

func (p *pki) write(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	f := filepath.Join(p.dir, name)
	require.NoError(t, os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
	return f
}

// issue signs a certificate for 127.0.0.1 (server and client use) and
// returns its certificate and key files.
func (p *pki) issue(t *testing.T, name string, serial int64) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+"-key.pem", "EC PRIVATE KEY", keyDER)
}

// serveTLS starts a server with the settings env describes.
func serveTLS(t *testing.T, env map[string]string) string {
	t.Helper()
	r := config.FromMap(env)
	s := LoadSettings(r, "tls-test", Defaults{GRPCAddr: "127.0.0.1:0"})
	require.NoError(t, r.Err())
	require.NotNil(t, s.TLS)
	s.Credentials = rpcauth.Credentials{rpcauth.Read: rpcauth.DigestOf(token)}
	srv := New(s, WithAccessTable(testTable), WithLogOutput(&syncBuffer{}))
	testpb.RegisterTestServiceServer(srv.GRPC(), &testService{release: make(chan struct{})})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, lis); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return lis.Addr().String()
}

// callWith dials addr with the client TLS environment given and makes one call.
func callWith(t *testing.T, addr string, env map[string]string) error {
	t.Helper()
	for _, k := range []string{tlsconfig.EnvCAFile, tlsconfig.EnvClientCertFile, tlsconfig.EnvClientKeyFile, tlsconfig.EnvEnabled} {
		t.Setenv(k, env[k])
	}
	conn, err := grpcclient.Dial(addr, token)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = testpb.NewTestServiceClient(conn).EmptyCall(ctx, &testpb.Empty{})
	return err
}

func TestTLS(t *testing.T) {
	p := newPKI(t)
	cert, key := p.issue(t, "server", 2)
	other := newPKI(t)

	addr := serveTLS(t, map[string]string{tlsconfig.EnvCertFile: cert, tlsconfig.EnvKeyFile: key})
	require.NoError(t, callWith(t, addr, map[string]string{tlsconfig.EnvCAFile: p.caFile}), "a client trusting the CA")
	require.Error(t, callWith(t, addr, map[string]string{tlsconfig.EnvCAFile: other.caFile}), "a client trusting another CA")
	require.Error(t, callWith(t, addr, nil), "a plaintext client")

	t.Run("mutual", func(t *testing.T) {
		addr := serveTLS(t, map[string]string{tlsconfig.EnvCertFile: cert, tlsconfig.EnvKeyFile: key, tlsconfig.EnvClientCAFile: p.caFile})
		clientCert, clientKey := p.issue(t, "client", 3)
		strangerCert, strangerKey := other.issue(t, "stranger", 4)
		require.NoError(t, callWith(t, addr, map[string]string{tlsconfig.EnvCAFile: p.caFile,
			tlsconfig.EnvClientCertFile: clientCert, tlsconfig.EnvClientKeyFile: clientKey}))
		require.Error(t, callWith(t, addr, map[string]string{tlsconfig.EnvCAFile: p.caFile}), "no client certificate")
		require.Error(t, callWith(t, addr, map[string]string{tlsconfig.EnvCAFile: p.caFile,
			tlsconfig.EnvClientCertFile: strangerCert, tlsconfig.EnvClientKeyFile: strangerKey}), "a certificate from another CA")
	})
}

func TestTLSSettingsErrors(t *testing.T) {
	p := newPKI(t)
	cert, _ := p.issue(t, "server", 2)
	for name, env := range map[string]map[string]string{
		"cert without key":      {tlsconfig.EnvCertFile: cert},
		"client CA alone":       {tlsconfig.EnvClientCAFile: p.caFile},
		"missing file":          {tlsconfig.EnvCertFile: "/nonexistent.pem", tlsconfig.EnvKeyFile: "/nonexistent-key.pem"},
		"key is no certificate": {tlsconfig.EnvCertFile: p.caFile, tlsconfig.EnvKeyFile: p.caFile},
	} {
		t.Run(name, func(t *testing.T) {
			r := config.FromMap(env)
			LoadSettings(r, "x", Defaults{GRPCAddr: ":1"})
			require.ErrorContains(t, r.Err(), tlsconfig.EnvCertFile)
		})
	}
	_, err := tlsconfig.Client(false, "/nonexistent-ca.pem", "", "")
	require.Error(t, err)
}
