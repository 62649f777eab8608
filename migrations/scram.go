package migrations

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"unicode"

	"golang.org/x/text/secure/precis"
)

// scramIterations is PostgreSQL's default (scram_iterations, 4096).
const scramIterations = 4096

// scramVerifier is the SCRAM-SHA-256 verifier PostgreSQL stores for
// password (RFC 5803's form, as libpq's PQencryptPasswordConn makes it):
// given in place of the password, it sets the same password without the
// password ever reaching the server. The verifier is made from the string
// the services' client, pgx, derives its proof from (scramPassword).
func scramVerifier(password string) (string, error) {
	password = scramPassword(password)
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	return scramVerifierWithSalt(password, salt)
}

// scramPassword is the string pgx derives a SCRAM proof from: the
// password as it is when it holds a code point Unicode 3.2 left unassigned
// (SASLprep refuses it, and PostgreSQL then takes the password as it is
// too), else its PRECIS OpaqueString form (SASLprep's successor), or the
// password as it is when that refuses it. PostgreSQL's own SASLprep
// (libpq, psql) normalises with NFKC, not NFC: a password with a
// compatibility character (ﬁ) logs in with pgx only.
func scramPassword(password string) string {
	for _, r := range password {
		if unicode.Is(saslprepUnassigned, r) {
			return password
		}
	}
	if normalized, err := precis.OpaqueString.String(password); err == nil {
		return normalized
	}
	return password
}

func scramVerifierWithSalt(password string, salt []byte) (string, error) {
	salted, err := pbkdf2.Key(sha256.New, password, salt, scramIterations, sha256.Size)
	if err != nil {
		return "", fmt.Errorf("derive the salted password: %w", err)
	}
	clientKey := hmacSHA256(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	serverKey := hmacSHA256(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", scramIterations, b64(salt), b64(storedKey[:]), b64(serverKey)), nil
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
