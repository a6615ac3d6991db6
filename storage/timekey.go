package storage

import (
	"encoding/binary"
	"time"
)

// TimeKeyLen is the length of a TimeKey.
const TimeKeyLen = 12

// AppendTimeKey appends t in 12 bytes that sort bytewise like time: seconds
// since the epoch with the sign bit flipped, then nanoseconds. Stores key
// and order records by it; unlike UnixNano it covers every time.Time, and
// unlike a SQL timestamp it keeps nanoseconds, so every store orders ties
// the same way.
func AppendTimeKey(b []byte, t time.Time) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(t.Unix())^(1<<63))
	return binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
}

// ParseTimeKey reads the time at the start of b (at least TimeKeyLen bytes).
func ParseTimeKey(b []byte) time.Time {
	sec := int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
	return time.Unix(sec, int64(binary.BigEndian.Uint32(b[8:]))).UTC()
}
