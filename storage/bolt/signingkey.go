package bolt

import (
	"bytes"
	"context"
	"crypto/hmac"
	"errors"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

// keySigningKey holds storage.SigningKeyCheck of the key the file's server
// signs access tokens and links with (Store.SigningKey); the key itself
// stays in the data directory (server.key) or with the operator (KASSA_KEY).
var keySigningKey = []byte("signingKey")

// ErrOtherSigningKey is the refusal of a signing key other than the one
// whose check value the file records: every link and token the server gave
// out before was signed with that one.
var ErrOtherSigningKey = errors.New("the signing key is not the one this store's server signs with")

// SigningKey records the check value of key, the key the server signs
// with, when the file records none (a new file, or one of a build before
// the check), and otherwise refuses, with ErrOtherSigningKey, a key whose
// check value differs: a server that started with another key would refuse
// every access token, document link and checkout link signed before, the
// buyers' among them, as PostgreSQL's replicas refuse a KASSA_KEY other
// than the recorded one (postgres.Store.SigningKey). ForgetSigningKey is
// how keys are changed on purpose.
func (s *Store) SigningKey(key []byte) error {
	check := storage.SigningKeyCheck(key)
	var recorded []byte
	if err := s.view(func(btx *bbolt.Tx) error {
		recorded = recordedKeyCheck(btx)
		return nil
	}); err != nil {
		return err
	}
	if recorded == nil {
		// Durably, as server.key is written: a recorded value lost in a
		// crash would let the next start take another key unchecked.
		if err := s.db.Update(func(btx *bbolt.Tx) error {
			if recorded = recordedKeyCheck(btx); recorded != nil {
				return nil
			}
			recorded = check
			if err := btx.Bucket(bInfo).Put(keySigningKey, check); err != nil {
				return err
			}
			return markOurs(btx)
		}); err != nil {
			return fault.Internalf(err, "record the signing key's check value")
		}
	}
	if !hmac.Equal(recorded, check) {
		return ErrOtherSigningKey
	}
	return nil
}

// ForgetSigningKey removes the recorded check value of the signing key
// (kassa store rekey), so that the next SigningKey records the key it
// is given: the way to change keys on purpose, after which every link and
// token signed with the old key is refused. ctx is not used: the file's
// lock, held since Open, keeps any server out; it gives the method
// postgres.Store.ForgetSigningKey's shape.
func (s *Store) ForgetSigningKey(ctx context.Context) (forgot bool, err error) {
	err = s.db.Update(func(btx *bbolt.Tx) error {
		info := btx.Bucket(bInfo)
		if forgot = info.Get(keySigningKey) != nil; !forgot {
			return nil
		}
		if err := info.Delete(keySigningKey); err != nil {
			return err
		}
		return markOurs(btx)
	})
	if err != nil {
		return false, fault.Internalf(err, "forget the signing key's check value")
	}
	return forgot, nil
}

// SigningKey reports, without writing, whether key is the one the file's
// server signs with: nil when it is, or when the file records no check
// value; ErrOtherSigningKey when it records another's, or key is nil (kassa
// store copy, which would carry another key, or none, to the database).
func (r *ReadOnly) SigningKey(key []byte) error {
	var recorded []byte
	if err := r.db.View(func(btx *bbolt.Tx) error {
		recorded = recordedKeyCheck(btx)
		return nil
	}); err != nil {
		return err
	}
	if recorded != nil && (key == nil || !hmac.Equal(recorded, storage.SigningKeyCheck(key))) {
		return ErrOtherSigningKey
	}
	return nil
}

// recordedKeyCheck is the check value of the signing key the file records,
// a copy that outlives btx; nil when it records none (or, a file opened
// read-only before any start made it, has no storeinfo).
func recordedKeyCheck(btx *bbolt.Tx) []byte {
	if info := btx.Bucket(bInfo); info != nil {
		return bytes.Clone(info.Get(keySigningKey))
	}
	return nil
}
