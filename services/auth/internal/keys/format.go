// Package keys issues, stores and verifies API keys. A key reads
// `bmcis_<keyid>_<secret>`: the key id is the visible lookup handle, the
// secret carries 256 bits from crypto/rand, and only the SHA-256 of the secret
// is ever stored.
package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"fmt"
	"strings"
)

// Prefix starts every key, so keys are recognisable in configs and by secret
// scanners.
const Prefix = "bmcis_"

const (
	idBytes     = 10 // 80 bits: 16 characters, collisions negligible
	secretBytes = 32 // 256 bits: 52 characters
	idLen       = 16
	secretLen   = 52
)

// encoding is lowercase base32 without padding: no '_' (the separator), no
// '-', so a key is one word to double-click and to grep.
var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// compareHashes is subtle.ConstantTimeCompare; a variable so a test can prove
// verification goes through it.
var compareHashes = subtle.ConstantTimeCompare

// Generated is a freshly made key.
type Generated struct {
	// Full is the whole key, shown to its holder once.
	Full string
	// ID is the key id.
	ID string
	// Hash is the SHA-256 of the secret.
	Hash [32]byte
}

// Generate makes a new key from crypto/rand.
func Generate() (Generated, error) {
	var id [idBytes]byte
	var secret [secretBytes]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Generated{}, fmt.Errorf("read random key id: %w", err)
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return Generated{}, fmt.Errorf("read random secret: %w", err)
	}
	g := Generated{ID: encoding.EncodeToString(id[:])}
	s := encoding.EncodeToString(secret[:])
	g.Full = Prefix + g.ID + "_" + s
	g.Hash = HashSecret(s)
	return g, nil
}

// HashSecret returns the stored form of a secret. A plain SHA-256 suffices:
// the secret is 256 random bits, so there is nothing to brute-force that a
// slow hash would protect.
func HashSecret(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// Parse splits a full key into key id and secret. It reports false for
// anything that is not well formed, without saying what (the input is secret).
func Parse(key string) (id, secret string, ok bool) {
	rest, found := strings.CutPrefix(key, Prefix)
	if !found {
		return "", "", false
	}
	id, secret, found = strings.Cut(rest, "_")
	if !found || !ValidID(id) || len(secret) != secretLen || !inAlphabet(secret) {
		return "", "", false
	}
	return id, secret, true
}

// ValidID reports whether s has the shape of a key id.
func ValidID(s string) bool { return len(s) == idLen && inAlphabet(s) }

func inAlphabet(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// secretMatches compares the secret's hash with the stored one in constant
// time, so response timing says nothing about how much of it matched.
func secretMatches(secret string, stored []byte) bool {
	h := HashSecret(secret)
	return compareHashes(h[:], stored) == 1
}
