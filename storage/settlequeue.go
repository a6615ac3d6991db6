package storage

import (
	"encoding/json"
	"errors"

	"github.com/kassahq/kassa/settlement"
)

// QueuedItem is a settlement item as the stores keep it in their queue.
//
// A recourse item is kept behind a marker byte, which is not JSON: builds
// before recourses were settled have no case for the kind, and their
// settlement run deleted such an item from the queue and paid out nothing
// against it, leaving the merchant both the capture and the claim. During a
// rolling upgrade (an older and a newer replica on one PostgreSQL database)
// or after a downgrade, an older build's run now fails on the item instead,
// settling nothing, and a newer build settles it. Other kinds stay plain
// JSON, which every build reads.
type QueuedItem settlement.Item

// queuedMarked begins a queued item older builds must not read.
const queuedMarked = 0x01

// MarshalBinary encodes the item for a store's queue.
func (q QueuedItem) MarshalBinary() ([]byte, error) {
	b, err := json.Marshal(settlement.Item(q))
	if err != nil || q.Kind != settlement.KindRecourse {
		return b, err
	}
	return append([]byte{queuedMarked}, b...), nil
}

// UnmarshalBinary reads what MarshalBinary wrote, or an item an older build
// queued (plain JSON).
func (q *QueuedItem) UnmarshalBinary(b []byte) error {
	if len(b) > 0 && b[0] == queuedMarked {
		b = b[1:]
		if err := json.Unmarshal(b, (*settlement.Item)(q)); err != nil {
			return err
		}
		if q.Kind != settlement.KindRecourse {
			return errors.New("a marked settlement item that is no recourse")
		}
		return nil
	}
	return json.Unmarshal(b, (*settlement.Item)(q))
}
