package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
)

// idempotencyFramed marks the framed encoding; a record in the older
// encoding is a JSON object and starts with '{'.
const idempotencyFramed = 0x01

// MarshalBinary encodes the record for a store: a marker byte, the length of
// the record's JSON without the answer, that JSON, and the answer's bytes as
// they are. The answer is most of a record (a capture answers with the whole
// order, tens of kilobytes); as a JSON field it would be base64, a third
// larger and costly to encode and to compress, on every mutation.
func (r *IdempotencyRecord) MarshalBinary() ([]byte, error) {
	head := *r
	head.Body = nil
	h, err := json.Marshal(&head)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(h)+len(r.Body))
	b = append(b, idempotencyFramed)
	b = binary.AppendUvarint(b, uint64(len(h)))
	b = append(b, h...)
	return append(b, r.Body...), nil
}

// UnmarshalBinary decodes either encoding: the framed one of MarshalBinary,
// or a JSON object as stores wrote before it.
func (r *IdempotencyRecord) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != idempotencyFramed {
		*r = IdempotencyRecord{}
		err := json.Unmarshal(b, r)
		if len(r.Body) == 0 {
			r.Body = nil // an empty answer reads the same in either encoding
		}
		return err
	}
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || n > uint64(len(b)-1-w) {
		return errors.New("idempotency record: bad frame")
	}
	head, body := b[1+w:1+w+int(n)], b[1+w+int(n):]
	*r = IdempotencyRecord{}
	if err := json.Unmarshal(head, r); err != nil {
		return err
	}
	if len(body) > 0 {
		r.Body = append([]byte(nil), body...)
	}
	return nil
}
