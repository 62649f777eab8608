package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// signer is a code-signing identity a company would hold: a leaf
// certificate under an intermediate under its own root, as PEM files.
type signer struct {
	cert, key, chain, root string
}

// newSigner writes a root, an intermediate and a code-signing leaf (RSA:
// the MCPB CLI signs with RSA keys) under dir.
func newSigner(t *testing.T, dir string) signer {
	t.Helper()
	now := time.Now()
	issue := func(tmpl, parent *x509.Certificate, parentKey *rsa.PrivateKey) (*x509.Certificate, *rsa.PrivateKey, []byte) {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		require.NoError(t, err)
		if parent == nil {
			parent, parentKey = tmpl, k
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, parentKey)
		require.NoError(t, err)
		c, err := x509.ParseCertificate(der)
		require.NoError(t, err)
		return c, k, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	ca := func(serial int64, cn string) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	}
	rootCert, rootKey, rootPEM := issue(ca(1, "BMCIS test root"), nil, nil)
	midCert, midKey, midPEM := issue(ca(2, "BMCIS test intermediate"), rootCert, rootKey)
	_, leafKey, leafPEM := issue(&x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "BMCIS test publisher"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}}, midCert, midKey)

	s := signer{cert: filepath.Join(dir, "publisher.pem"), key: filepath.Join(dir, "publisher-key.pem"),
		chain: filepath.Join(dir, "intermediate.pem"), root: filepath.Join(dir, "root.pem")}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(leafKey)})
	for path, b := range map[string][]byte{s.cert: leafPEM, s.key: keyPEM, s.chain: midPEM, s.root: rootPEM} {
		require.NoError(t, os.WriteFile(path, b, 0o600))
	}
	return s
}

// verifyBundleSignature checks a signed bundle the way a verifier that
// trusts root would: the MCPB signature block (MCPB_SIG_V1, length, DER
// PKCS#7, MCPB_SIG_END) is split off, and OpenSSL verifies the detached
// signature over the rest and the chain up to root.
func verifyBundleSignature(t *testing.T, bundle, root string) error {
	t.Helper()
	b, err := os.ReadFile(bundle)
	require.NoError(t, err)
	footer := []byte("MCPB_SIG_END")
	require.True(t, bytes.HasSuffix(b, footer), "the bundle ends with a signature block")
	head := bytes.LastIndex(b, []byte("MCPB_SIG_V1"))
	require.Positive(t, head)
	n := int(binary.LittleEndian.Uint32(b[head+len("MCPB_SIG_V1"):]))
	sig := b[head+len("MCPB_SIG_V1")+4:]
	require.Len(t, sig, n+len(footer))
	dir := t.TempDir()
	content, der := filepath.Join(dir, "content"), filepath.Join(dir, "signature.der")
	require.NoError(t, os.WriteFile(content, b[:head], 0o600))
	require.NoError(t, os.WriteFile(der, sig[:n], 0o600))
	// -purpose any: the leaf is for code signing, not S/MIME (cms's default).
	out, err := exec.Command("openssl", "cms", "-verify", "-binary", "-inform", "DER", "-in", der,
		"-content", content, "-CAfile", root, "-purpose", "any", "-out", os.DevNull).CombinedOutput()
	if err != nil {
		return &verifyError{out: string(out)}
	}
	return nil
}

type verifyError struct{ out string }

func (e *verifyError) Error() string { return "openssl cms -verify: " + e.out }

// build.sh refuses a signing identity whose key is not the certificate's,
// or only half of one, before building anything: `mcpb sign` itself would
// write a signature no one can verify.
func TestBundleRefusesABadSigningIdentity(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	dir := t.TempDir()
	s := newSigner(t, dir)
	other := newSigner(t, t.TempDir())
	junk := filepath.Join(dir, "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("not a certificate\n"), 0o600))
	build := filepath.Join(stacktest.RepoRoot(t), "deploy", "mcpb", "build.sh")
	for name, tc := range map[string]struct {
		env  []string
		want string
	}{
		"another key":  {[]string{"MCPB_SIGN_CERT=" + s.cert, "MCPB_SIGN_KEY=" + other.key}, "is not the key of MCPB_SIGN_CERT"},
		"no key":       {[]string{"MCPB_SIGN_CERT=" + s.cert}, "needs both"},
		"missing file": {[]string{"MCPB_SIGN_CERT=" + s.cert, "MCPB_SIGN_KEY=" + filepath.Join(dir, "absent.pem")}, "cannot read signing file"},
		"not PEM":      {[]string{"MCPB_SIGN_CERT=" + junk, "MCPB_SIGN_KEY=" + s.key}, "is not the key of MCPB_SIGN_CERT"},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(build)
			cmd.Env = append(os.Environ(), append(tc.env, "MCPB_OUT="+filepath.Join(dir, "never.mcpb"))...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "%s", out)
			require.Equal(t, 2, exit.ExitCode())
			require.Contains(t, string(out), tc.want)
			require.NoFileExists(t, filepath.Join(dir, "never.mcpb"))
		})
	}
}
