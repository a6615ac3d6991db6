package bolt

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

// Top-level buckets. Every key lives in one of these flat buckets (no nested
// buckets), so a transaction's undo journal only has to remember puts and
// deletes of plain keys.
var (
	bMerchants  = []byte("merchants")   // merchant id → JSON
	bClients    = []byte("clients")     // client id → merchant id
	bOrders     = []byte("orders")      // lp(merchant) id → lp(meta) JSON; see encodeOrder
	bIndex      = []byte("orderindex")  // see meta.indexKeys; value present
	bCounts     = []byte("ordercount")  // lp(merchant) kind lp(value) → uint64 entries
	bDue        = []byte("orderdue")    // time(expiresAt) lp(merchant) id → empty; expirable orders only
	bAuth       = []byte("authtokens")  // lp(merchant) token → JSON
	bAuthExp    = []byte("authexp")     // time(expiresAt) lp(merchant) token → empty: the retention sweep's walk
	bCustomer   = []byte("custtokens")  // lp(merchant) id → JSON
	bSeq        = []byte("sequences")   // lp(merchant) series → uint64
	bIdem       = []byte("idem")        // lp(merchant) key → storage.EncodeRecord
	bIdemExp    = []byte("idemexp")     // time(expiresAt) lp(merchant) key → empty
	bOutbox     = []byte("outbox")      // id → JSON
	bOutboxDue  = []byte("outboxdue")   // time(nextAttempt) id → empty; not done only; a claim with few due reads it (and builds before outboxmdue did)
	bOutboxIx   = []byte("outboxix")    // lp(merchant) time(createdAt) id → empty
	bOutboxMDue = []byte("outboxmdue")  // lp(merchant) time(nextAttempt) id → empty; not done only
	bOutboxDone = []byte("outboxdone")  // time(createdAt) id → empty; done only: the retention sweep's walk
	bSessions   = []byte("sessions")    // lp(merchant) id → JSON
	bSessionIx  = []byte("sessionix")   // lp(merchant) 'c'|'s'|'m'|'u'|'x'|'o' …; see sessionEntries
	bSettleQ    = []byte("settleq")     // item key → JSON item (unsettled)
	bSettleQIx  = []byte("settleqix")   // time(occurredAt) item key → empty: the queue oldest first
	bSettle     = []byte("settlements") // lp(merchant) id → JSON settlement
	bSettleIx   = []byte("settleix")    // lp(merchant) time(createdAt) id → empty
	bSettleTx   = []byte("settletx")    // lp(merchant) lp(settlement) seq(4 bytes) → JSON transaction
	bSettleTxID = []byte("settletxid")  // lp(merchant) lp(settlement) id → seq(4 bytes): where a page after fromId starts
	bTasks      = []byte("tasks")       // id → JSON task
	bTaskDue    = []byte("taskdue")     // time(dueAt) id → empty
	bInfo       = []byte("storeinfo")   // name → uint64 (keyStatusRules), a mark, or the signing key's check value
)

// keyStatusRules holds the order.StatusRules the status index was built with.
var keyStatusRules = []byte("statusRules")

// keyLastCommit holds the bbolt transaction id of the last commit this
// build made (markOurs).
var keyLastCommit = []byte("lastCommit")

// keySettleTxIDs marks a file whose settletxid index covers every settlement
// transaction (files from before the index get it built once, at Open).
var keySettleTxIDs = []byte("settleTxIDs")

// keySettleQOrder marks a file whose settleqix index covers the settlement
// queue (files from before the index get it built once, at Open).
var keySettleQOrder = []byte("settleQOrder")

// keyOutboxMerchantDue marks a file whose outboxmdue index covers every
// pending outbox message (files from before the index get it built once,
// at Open).
var keyOutboxMerchantDue = []byte("outboxMerchantDue")

// keyOutboxDone marks a file whose outboxdone index covers every done
// outbox message (files from before the index get it built once, at Open).
var keyOutboxDone = []byte("outboxDone")

// keyAuthExpiry marks a file whose authexp index covers every
// authorization token (files from before the index get it built once, at
// Open).
var keyAuthExpiry = []byte("authExpiry")

var buckets = [][]byte{bMerchants, bClients, bOrders, bIndex, bCounts, bDue, bAuth, bAuthExp, bCustomer,
	bSeq, bIdem, bIdemExp, bOutbox, bOutboxDue, bOutboxIx, bOutboxMDue, bOutboxDone, bSessions, bSessionIx, bSettleQ, bSettleQIx, bSettle, bSettleIx, bSettleTx, bSettleTxID, bTasks, bTaskDue, bInfo}

// Index kinds of the order index. Equality kinds are followed by the
// length-prefixed value, then the order's createdAt and id, so that one
// value's orders sort by (createdAt, id) and are walked backwards for
// newest-first lists. kindExpires is a range index: expiresAt, createdAt, id.
const (
	kindCreated     byte = 'c' // value always ""; every order
	kindStore       byte = 's'
	kindOrderRef    byte = 'r'
	kindMerchantRef byte = 'm'
	kindStatus      byte = 't'
	kindCategory    byte = 'p'
	kindExpires     byte = 'e'
)

const timeLen = storage.TimeKeyLen

// putTime appends t in 12 bytes that sort like time: seconds since the epoch
// with the sign bit flipped, then nanoseconds. It covers every time.Time,
// unlike UnixNano, which overflows outside 1678–2262.
func putTime(b []byte, t time.Time) []byte { return storage.AppendTimeKey(b, t) }

func getTime(b []byte) time.Time { return storage.ParseTimeKey(b) }

// lp appends s with a length prefix. Length prefixes keep composite keys
// unambiguous whatever bytes a merchant puts into a reference; the indexes
// need prefix uniqueness, not ordering across values.
func lp(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func key(parts ...string) []byte {
	var b []byte
	for _, p := range parts[:len(parts)-1] {
		b = lp(b, p)
	}
	return append(b, parts[len(parts)-1]...)
}

// orderKey is the key of an order in bOrders: the merchant
// first, so one merchant can never address another's order.
func orderKey(merchantID, orderID string) []byte { return key(merchantID, orderID) }

// valuePrefix is the index prefix of one (kind, value) of a merchant.
func valuePrefix(merchantID string, kind byte, value string) []byte {
	b := lp(nil, merchantID)
	b = append(b, kind)
	return lp(b, value)
}

// position is where an order sits in newest-first order: createdAt, then id.
func position(created time.Time, id string) []byte {
	return append(putTime(make([]byte, 0, timeLen+len(id)), created), id...)
}

func expiresPrefix(merchantID string) []byte {
	return append(lp(nil, merchantID), kindExpires)
}

// successor returns the smallest key greater than every key with prefix p,
// or nil when there is none (p is all 0xff).
func successor(p []byte) []byte {
	s := bytes.Clone(p)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] < 0xff {
			s[i]++
			return s[:i+1]
		}
	}
	return nil
}

// Cursors are the position of the last order of a page, base64url-encoded:
// opaque to clients, and stable under concurrent inserts because the next
// page starts strictly after a position, not at an offset.
func encodeCursor(pos []byte) string { return base64.RawURLEncoding.EncodeToString(pos) }

func decodeCursor(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < timeLen {
		return nil, fault.Invalidf("cursor", "is not a cursor from this server")
	}
	return b, nil
}
