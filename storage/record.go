package storage

import (
	"encoding"
	"encoding/json"
)

// EncodeRecord is how every store writes a record: its own binary form when
// it has one (IdempotencyRecord), JSON otherwise.
func EncodeRecord(v any) ([]byte, error) {
	if m, ok := v.(encoding.BinaryMarshaler); ok {
		return m.MarshalBinary()
	}
	return json.Marshal(v)
}

// DecodeRecord reads what EncodeRecord wrote into v, a pointer.
func DecodeRecord(b []byte, v any) error {
	if u, ok := v.(encoding.BinaryUnmarshaler); ok {
		return u.UnmarshalBinary(b)
	}
	return json.Unmarshal(b, v)
}
