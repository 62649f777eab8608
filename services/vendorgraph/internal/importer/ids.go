package importer

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
)

// UUID is a 16-byte id, the form the database stores.
type UUID = [16]byte

// namespace is the fixed UUIDv5 namespace for ids derived from file ids.
// Changing it would give every imported record a new id: never change it.
var namespace = mustParseUUID("3b0e6f0c-6c0a-5d5e-9a7e-1f0d7a2c4b10")

// EntityID maps an entity id from an import file to its UUID. A canonical
// UUID ("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", any case) is used as it is;
// any other string becomes UUIDv5(namespace, "entity:"+id), so the same file
// id always names the same entity, in every import.
func EntityID(fileID string) UUID {
	if u, ok := ParseUUID(fileID); ok {
		return u
	}
	return uuidV5("entity:" + fileID)
}

// RelationshipID maps a relationship id from an import file to its UUID, the
// same way EntityID does, in a separate name space ("relationship:").
func RelationshipID(fileID string) UUID {
	if u, ok := ParseUUID(fileID); ok {
		return u
	}
	return uuidV5("relationship:" + fileID)
}

// edgeID derives the id of a relationship given without one from what it
// connects, so re-importing it finds the same row.
func edgeID(source UUID, relType string, target UUID) UUID {
	return uuidV5("edge:" + FormatUUID(source) + "/" + relType + "/" + FormatUUID(target))
}

func uuidV5(name string) UUID {
	h := sha1.New()
	h.Write(namespace[:])
	h.Write([]byte(name))
	var u UUID
	copy(u[:], h.Sum(nil))
	u[6] = (u[6] & 0x0f) | 0x50 // version 5
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	return u
}

// ParseUUID parses the canonical 36-character form.
func ParseUUID(s string) (UUID, bool) {
	var u UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	hexDigits := strings.ReplaceAll(s, "-", "")
	if len(hexDigits) != 32 {
		return u, false
	}
	if _, err := hex.Decode(u[:], []byte(hexDigits)); err != nil {
		return u, false
	}
	return u, true
}

// FormatUUID returns the canonical lowercase form.
func FormatUUID(u UUID) string {
	var buf [36]byte
	hex.Encode(buf[0:8], u[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], u[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], u[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], u[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:], u[10:])
	return string(buf[:])
}

func mustParseUUID(s string) UUID {
	u, ok := ParseUUID(s)
	if !ok {
		panic("bad uuid " + s)
	}
	return u
}
