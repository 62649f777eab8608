package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// signer is a code-signing identity a company would hold: a leaf under
// two intermediates under its own root, as PEM files. cert holds the leaf
// followed by the lower intermediate (a "full chain" file), chain the
// upper one, so a bundle verifies up to root only if both are embedded.
type signer struct {
	cert, key, chain, root string
}

// newSigner writes such an identity under dir (RSA: the MCPB CLI signs
// with RSA keys only).
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
	upCert, upKey, upPEM := issue(ca(2, "BMCIS test intermediate 1"), rootCert, rootKey)
	lowCert, lowKey, lowPEM := issue(ca(3, "BMCIS test intermediate 2"), upCert, upKey)
	_, leafKey, leafPEM := issue(&x509.Certificate{SerialNumber: big.NewInt(4), Subject: pkix.Name{CommonName: "BMCIS test publisher"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}}, lowCert, lowKey)

	s := signer{cert: filepath.Join(dir, "publisher-fullchain.pem"), key: filepath.Join(dir, "publisher-key.pem"),
		chain: filepath.Join(dir, "intermediate.pem"), root: filepath.Join(dir, "root.pem")}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(leafKey)})
	for path, b := range map[string][]byte{s.cert: append(leafPEM, lowPEM...), s.key: keyPEM, s.chain: upPEM, s.root: rootPEM} {
		require.NoError(t, os.WriteFile(path, b, 0o600))
	}
	return s
}

// signingEnv is the environment without any MCPB_SIGN_* of the caller's.
func signingEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCPB_SIGN_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// verifyBundleSignature checks a signed bundle the way a verifier that
// trusts root (and nothing else) would: the MCPB signature block
// (MCPB_SIG_V1, length, DER PKCS#7, MCPB_SIG_END) is split off, OpenSSL
// verifies the detached signature over the rest and the chain up to root,
// and the signer must be a code-signing certificate. It returns the
// signer's common name.
func verifyBundleSignature(t *testing.T, bundle, root string) (string, error) {
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
	content, der, signerPEM := filepath.Join(dir, "content"), filepath.Join(dir, "signature.der"), filepath.Join(dir, "signer.pem")
	require.NoError(t, os.WriteFile(content, b[:head], 0o600))
	require.NoError(t, os.WriteFile(der, sig[:n], 0o600))
	// -purpose any: OpenSSL 3.0 has no code-signing purpose (the EKU is
	// checked below); -no-CApath -no-CAstore: root is the only anchor.
	out, err := exec.Command("openssl", "cms", "-verify", "-binary", "-inform", "DER", "-in", der,
		"-content", content, "-CAfile", root, "-no-CApath", "-no-CAstore", "-purpose", "any",
		"-signer", signerPEM, "-out", os.DevNull).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("openssl cms -verify: %s", out)
	}
	raw, err := os.ReadFile(signerPEM)
	require.NoError(t, err)
	blk, _ := pem.Decode(raw)
	require.NotNil(t, blk)
	cert, err := x509.ParseCertificate(blk.Bytes)
	require.NoError(t, err)
	require.Contains(t, cert.ExtKeyUsage, x509.ExtKeyUsageCodeSigning, "signed by a code-signing certificate")
	return cert.Subject.CommonName, nil
}

// build.sh refuses, before building anything, a signing identity the MCPB
// CLI would mishandle: a key that is not the certificate's (it would write
// a signature no one can verify), half an identity, files that are not
// PEM, an encrypted or an EC key (it fails on both after the build).
func TestBundleRefusesABadSigningIdentity(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	dir := t.TempDir()
	s := newSigner(t, dir)
	other := newSigner(t, t.TempDir())
	junk := filepath.Join(dir, "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("not a certificate\n"), 0o600))
	encrypted := filepath.Join(dir, "encrypted-key.pem")
	out, err := exec.Command("openssl", "pkey", "-in", s.key, "-aes128", "-passout", "pass:secret", "-out", encrypted).CombinedOutput()
	require.NoError(t, err, "%s", out)
	ecKey, ecCert := filepath.Join(dir, "ec-key.pem"), filepath.Join(dir, "ec-cert.pem")
	out, err = exec.Command("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
		"-keyout", ecKey, "-out", ecCert, "-days", "1", "-subj", "/CN=BMCIS EC publisher").CombinedOutput()
	require.NoError(t, err, "%s", out)
	build := filepath.Join(stacktest.RepoRoot(t), "deploy", "mcpb", "build.sh")
	for name, tc := range map[string]struct {
		env  []string
		want string
	}{
		"another key":          {[]string{"MCPB_SIGN_CERT=" + s.cert, "MCPB_SIGN_KEY=" + other.key}, "is not the key of MCPB_SIGN_CERT"},
		"no key":               {[]string{"MCPB_SIGN_CERT=" + s.cert}, "needs both"},
		"missing file":         {[]string{"MCPB_SIGN_CERT=" + s.cert, "MCPB_SIGN_KEY=" + filepath.Join(dir, "absent.pem")}, "cannot read signing file"},
		"not PEM":              {[]string{"MCPB_SIGN_CERT=" + junk, "MCPB_SIGN_KEY=" + s.key}, "holds no PEM certificate"},
		"chain not PEM":        {[]string{"MCPB_SIGN_CERT=" + s.cert, "MCPB_SIGN_KEY=" + s.key, "MCPB_SIGN_CHAIN=" + s.chain + " " + junk}, "holds no PEM certificate"},
		"key is a certificate": {[]string{"MCPB_SIGN_CERT=" + s.cert, "MCPB_SIGN_KEY=" + s.cert}, "does not start with a PEM private key"},
		"encrypted key":        {[]string{"MCPB_SIGN_CERT=" + s.cert, "MCPB_SIGN_KEY=" + encrypted}, "needs it unencrypted"},
		"EC key":               {[]string{"MCPB_SIGN_CERT=" + ecCert, "MCPB_SIGN_KEY=" + ecKey}, "RSA keys only"},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(build)
			cmd.Env = signingEnv(append(tc.env, "MCPB_OUT="+filepath.Join(dir, "never.mcpb"))...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "%s", out)
			require.Equal(t, 2, exit.ExitCode())
			require.Contains(t, string(out), tc.want)
			require.NoFileExists(t, filepath.Join(dir, "never.mcpb"))
		})
	}
}
