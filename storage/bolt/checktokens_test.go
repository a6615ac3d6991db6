package bolt

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

// An authorization token is a credential (with the merchant's, it creates an
// order), so the check names one as the logs do, by its fingerprint: a
// problem in a token's record or its expiry entry printed the token itself
// into output an operator pastes into tickets, and a token record (or a
// customer token) kept under another token's key printed both tokens in
// what it said was wrong.
func TestCheckNamesTokensByFingerprint(t *testing.T) {
	_, f, s := openFresh(t)
	ctx := context.Background()
	at := f.Clock.Now()
	const good, broken, moved = "at_goodTOKENgoodTOKENgood", "at_brokenTOKENbrokenTOKEN", "at_movedTOKENmovedTOKENmov"
	const customer, customerMoved = "ct_customerTOKENcustomer", "ct_customerMOVEDcustomer"
	err := s.Update(ctx, func(tx storage.Tx) error {
		if err := tx.PutCustomerToken(&token.Customer{Record: token.Record{TokenID: customer, MerchantID: "m1", Country: "SE"}, Currency: "SEK", CreatedAt: at}); err != nil {
			return err
		}
		return tx.PutAuthorization(&token.Authorization{Token: good, MerchantID: "m1", Country: "SE", Currency: "SEK", CreatedAt: at, ExpiresAt: at.Add(time.Hour)})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(btx *bbolt.Tx) error {
		// A record that does not decode, one kept under another token's
		// key, and an expiry entry at the wrong time.
		if err := btx.Bucket(bAuth).Put(key("m1", broken), []byte("{")); err != nil {
			return err
		}
		if err := btx.Bucket(bAuth).Put(key("m1", moved), btx.Bucket(bAuth).Get(key("m1", good))); err != nil {
			return err
		}
		if err := btx.Bucket(bCustomer).Put(key("m1", customerMoved), btx.Bucket(bCustomer).Get(key("m1", customer))); err != nil {
			return err
		}
		k := append(putTime(nil, at.Add(5*time.Hour)), lp(nil, "m1")...)
		return btx.Bucket(bAuthExp).Put(append(k, good...), present)
	})
	if err != nil {
		t.Fatal(err)
	}
	got := s.Check()
	if got == nil {
		t.Fatal("the check passed a broken token record and a stale expiry entry")
	}
	msg := got.Error()
	for _, tok := range []string{good, broken, moved, customer, customerMoved} {
		if strings.Contains(msg, tok) || strings.Contains(msg, strings.ToUpper(tok[3:])) {
			t.Errorf("the check printed token %s:\n%s", tok, msg)
		}
	}
	for _, tok := range []string{good, broken, moved, customer, customerMoved} {
		if !strings.Contains(msg, token.Fingerprint(tok)) {
			t.Errorf("the check does not name token %s by its fingerprint %s:\n%s", tok, token.Fingerprint(tok), msg)
		}
	}
}

// Dump, which kassa store copy prints the error of, names a token record it
// cannot read as the check does, by the token's fingerprint: it quoted the
// stored key, token and all, into the copy's refusal.
func TestDumpNamesTokensByFingerprint(t *testing.T) {
	for _, bucket := range [][]byte{bAuth, bCustomer} {
		t.Run(string(bucket), func(t *testing.T) {
			_, _, s := openFresh(t)
			const tok = "at_damagedKEYdamagedKEYdam"
			// A length prefix longer than the key: the merchant id cannot
			// be cut from it, as after a damaged page.
			k := append([]byte{0xc8, 0x01}, "m1"+tok...)
			err := s.db.Update(func(btx *bbolt.Tx) error { return btx.Bucket(bucket).Put(k, []byte("{}")) })
			if err != nil {
				t.Fatal(err)
			}
			err = s.Dump(context.Background(), func(storage.Record) error { return nil })
			if err == nil {
				t.Fatal("Dump passed a token record whose key does not parse")
			}
			msg := err.Error()
			if strings.Contains(msg, tok) || strings.Contains(msg, "damagedKEY") {
				t.Errorf("Dump printed the token:\n%s", msg)
			}
			if want := shownKey(bucket, k); !strings.Contains(msg, want) || !strings.Contains(msg, string(bucket)) || !strings.Contains(msg, "bad key") {
				t.Errorf("Dump's error %q does not name the record as %q, with its bucket and what is wrong", msg, want)
			}
		})
	}
}
