package storage

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
)

// RecordKind names a kind of record in a copy from one store to another
// (kassa store copy): every record a store holds is of one of these kinds.
// Indexes are not copied; the receiving store builds its own.
type RecordKind string

// The kinds of record a Dumper gives.
const (
	KindMerchant              RecordKind = "merchants"
	KindOrder                 RecordKind = "orders"
	KindAuthorization         RecordKind = "authorization tokens"
	KindCustomerToken         RecordKind = "customer tokens"
	KindSession               RecordKind = "sessions"
	KindSettlementItem        RecordKind = "settlement queue items"
	KindSettlement            RecordKind = "settlements"
	KindSettlementTransaction RecordKind = "settlement transactions"
	KindTask                  RecordKind = "tasks"
	KindSequence              RecordKind = "sequences"
	KindIdempotency           RecordKind = "idempotency records"
	KindOutbox                RecordKind = "notifications"
	// KindSigningKey is not a record of a store but of its deployment (bolt
	// keeps it in the data directory): the key access tokens and links are
	// signed with, which PostgreSQL replicas share through the database.
	KindSigningKey RecordKind = "signing key"
)

// SigningKeyCheck is the check value a store keeps of the signing key its
// servers sign with (PostgreSQL's signing_key, bolt's storeinfo), so that a
// start with another key is refused: an HMAC of a fixed text, which shows
// whether two keys are one without giving the key away.
func SigningKeyCheck(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("kassa signing key check v1"))
	return m.Sum(nil)
}

// RecordKinds lists every kind, in the order a Dumper gives them; the slice
// is the caller's own.
func RecordKinds() []RecordKind {
	return []RecordKind{KindMerchant, KindOrder, KindAuthorization, KindCustomerToken, KindSession,
		KindSettlementItem, KindSettlement, KindSettlementTransaction, KindTask, KindSequence, KindIdempotency, KindOutbox,
		KindSigningKey}
}

// Record is one stored record as a Dumper gives it and a Loader takes it:
// where it is kept, and its stored bytes unchanged (EncodeRecord's form), so
// that a copy holds the same bytes, not a re-encoding that could differ.
type Record struct {
	Kind RecordKind
	// MerchantID is the merchant the record is kept under (every kind
	// kept by merchant; empty for tasks, settlement items, notifications,
	// whose merchant is in Body, and the signing key).
	MerchantID string
	// ID is the record's key under its merchant: the order, token, session,
	// settlement, task, notification or customer token id, the
	// idempotency key, the settlement item's key, the sequence's series.
	ID string
	// SettlementID is a settlement transaction's settlement.
	SettlementID string
	// Number is an order's version, a settlement transaction's place in its
	// settlement (seq), a sequence's last number given out.
	Number int64
	// Body is the stored record; a signing key's bytes; nil for a sequence.
	Body []byte
	// KeyCheckOnly, on a signing key, says the operator gives every server
	// the key (KASSA_KEY): the receiving store keeps only a check value of
	// it, as a replica started with KASSA_KEY records.
	KeyCheckOnly bool
}

// Dumper is a store that can give every record it holds, for a copy into
// another store.
type Dumper interface {
	// Dump calls fn with every record, as of one consistent snapshot, kind
	// by kind in RecordKinds order; an error of fn stops it and is
	// returned. It refuses (fault.Internal) a store holding data it cannot
	// give as records, rather than leave it out of the copy.
	Dump(ctx context.Context, fn func(Record) error) error
}

// Loader is a store that can take the records of another.
type Loader interface {
	// Load runs fill in one transaction: every record fill puts is written
	// as it is, ids, bytes, versions and sequence values unchanged, and is
	// committed together when fill returns nil; an error of fill or of a
	// put rolls all of it back. The store must hold no record of any kind:
	// otherwise Load writes nothing and fails with fault.Conflict, code
	// store_not_empty. counts gives how many records of each kind it wrote.
	Load(ctx context.Context, fill func(put func(Record) error) error) (counts map[RecordKind]int, err error)
}
