package storage

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
)

// Markers of the framed encodings; a record in the older encoding is a JSON
// object and starts with '{'.
const (
	idempotencyFramed     = 0x01 // the answer as it is
	idempotencyCompressed = 0x02 // the answer deflated
)

// CompressAnswerAbove is the answer size past which a record keeps its answer
// deflated. Every answer of a capture or refund is the whole order, and a key
// is kept for a day, so an order captured and refunded line by line stores
// the square of its size: 4 GB for 1 000 lines in bbolt. Deflate keeps about
// a seventh of such an answer. Smaller answers, the common ones, are kept as
// they are: compressing them saves little and costs each mutation CPU.
const CompressAnswerAbove = 64 << 10

// deflaters keeps flate writers for reuse: making one allocates about a
// megabyte, more than deflating a 100 KB answer costs. It is a fixed list,
// not a sync.Pool: a pool drops what it holds at every second garbage
// collection, and answers this large come now and then (a big order's
// capture amid small ones' traffic), so nearly each one made a new writer.
// Up to maxDeflaters are kept, a few megabytes once large answers were seen.
var deflaters = make(chan *flate.Writer, maxDeflaters)

// maxDeflaters is how many deflaters are kept: as many as writers deflate
// at once on a busy server (the commit loop of bbolt is one; PostgreSQL's
// transactions run side by side).
const maxDeflaters = 4

func getDeflater() *flate.Writer {
	select {
	case w := <-deflaters:
		return w
	default:
		w, _ := flate.NewWriter(nil, flate.BestSpeed) // the level is valid
		return w
	}
}

func putDeflater(w *flate.Writer) {
	select {
	case deflaters <- w:
	default: // enough are kept
	}
}

// maxInflated bounds what a compressed answer may inflate to, so that a
// damaged record cannot make a read allocate without limit.
const maxInflated = 1 << 30

// MarshalBinary encodes the record for a store: a marker byte, the length of
// the record's JSON without the answer, that JSON, and the answer's bytes as
// they are, or deflated when it is larger than CompressAnswerAbove. The
// answer is most of a record (a capture answers with the whole order, tens of
// kilobytes); as a JSON field it would be base64, a third larger and costly
// to encode and to compress, on every mutation.
func (r *IdempotencyRecord) MarshalBinary() ([]byte, error) {
	head := *r
	head.Body = nil
	h, err := json.Marshal(&head)
	if err != nil {
		return nil, err
	}
	marker, body := byte(idempotencyFramed), r.Body
	if len(r.Body) > CompressAnswerAbove {
		var buf bytes.Buffer
		buf.Grow(len(r.Body) / 4)
		w := getDeflater()
		w.Reset(&buf)
		_, err := w.Write(r.Body)
		if err == nil {
			err = w.Close()
		}
		w.Reset(nil) // so that a kept writer does not hold buf
		putDeflater(w)
		if err != nil {
			return nil, err
		}
		marker, body = idempotencyCompressed, buf.Bytes()
	}
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(h)+len(body))
	b = append(b, marker)
	b = binary.AppendUvarint(b, uint64(len(h)))
	b = append(b, h...)
	return append(b, body...), nil
}

// UnmarshalBinary decodes any encoding: the framed ones of MarshalBinary,
// or a JSON object as stores wrote before them.
func (r *IdempotencyRecord) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || (b[0] != idempotencyFramed && b[0] != idempotencyCompressed) {
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
	if b[0] == idempotencyCompressed {
		inflated, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(body)), maxInflated+1))
		if err != nil {
			return errors.New("idempotency record: bad compressed answer: " + err.Error())
		}
		if len(inflated) > maxInflated {
			return errors.New("idempotency record: compressed answer too large")
		}
		if len(inflated) > 0 {
			r.Body = inflated
		}
		return nil
	}
	if len(body) > 0 {
		r.Body = append([]byte(nil), body...)
	}
	return nil
}
