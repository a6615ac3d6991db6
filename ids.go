package kassa

import (
	"crypto/rand"
	"encoding/base32"

	"github.com/google/uuid"

	"github.com/kassahq/kassa/order"
)

// RandomIDs mints random identifiers: UUID v4 for records, and a short
// upper-case code for the human-friendly orderReference.
type RandomIDs struct{}

// NewID returns a new identifier of kind.
func (RandomIDs) NewID(kind string) string {
	if kind == order.KindOrderRef {
		var b [10]byte
		if _, err := rand.Read(b[:]); err != nil {
			panic(err) // crypto/rand never fails on supported platforms
		}
		return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])[:12]
	}
	return uuid.NewString()
}

// RandomSecret returns n random bytes encoded as URL-safe base32 text.
func RandomSecret(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)
}
