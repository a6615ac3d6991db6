package kassa

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
)

// Credentials are a merchant's API client id and secret. The secret is only
// ever known at creation; kassa stores a salted hash.
type Credentials struct {
	MerchantID   string `json:"merchantId"`
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
}

func hashSecret(salt []byte, secret string) []byte {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(secret))
	return h.Sum(nil)
}

// MerchantOptions describe a new merchant.
type MerchantOptions struct {
	Name         string // at most MaxMerchantName characters
	ClientID     string // generated when empty
	ClientSecret string // generated when empty
	// Sandbox marks a merchant of the sandbox (the one kassa serve's
	// --webhook-* flags configure when no client id is given); it changes
	// no rule of the API.
	Sandbox bool
	// RequireAck makes every order of the merchant start unacknowledged,
	// awaiting Acknowledge.
	RequireAck bool
	// Settlement fees per capture: basis points of the amount plus a fixed part.
	FeeBasisPoints, FeeFixedPerCapture int64
}

// MaxMerchantName bounds a merchant's name, in characters.
const MaxMerchantName = 200

// EnsureMerchant creates a merchant, or, when one with the client id exists,
// keeps it and sets the given secret (a new one when ClientSecret is empty);
// the other options of an existing merchant stay as they were. It returns the
// credentials (with the secret in clear, the only time it is available) and
// whether it created one.
func (l *Ledger) EnsureMerchant(ctx context.Context, mo MerchantOptions) (Credentials, bool, error) {
	if mo.ClientID == "" {
		mo.ClientID = "kc_" + RandomSecret(10)
	}
	if mo.ClientSecret == "" {
		mo.ClientSecret = "ks_" + RandomSecret(20)
	}
	var ff fault.Fields
	if mo.FeeBasisPoints < 0 || mo.FeeBasisPoints > 10000 {
		ff.Add("feeBasisPoints", "must be between 0 and 10000 basis points")
	}
	if mo.FeeFixedPerCapture < 0 || mo.FeeFixedPerCapture > 1_000_000 {
		ff.Add("feeFixedPerCapture", "must be between 0 and 1000000 minor units per capture")
	}
	if err := ff.Err(); err != nil {
		return Credentials{}, false, err
	}
	if len(mo.ClientID) > 200 || len(mo.ClientSecret) > 200 {
		return Credentials{}, false, fault.Invalidf("clientId", "client id and secret must be at most 200 characters")
	}
	// As every text: what PostgreSQL cannot hold (NUL, invalid UTF-8) is
	// refused on every store alike.
	order.CheckText(&ff, "name", mo.Name, MaxMerchantName)
	order.CheckText(&ff, "clientId", mo.ClientID, 200)
	if err := ff.Err(); err != nil {
		return Credentials{}, false, err
	}
	var creds Credentials
	created := false
	err := l.store.Update(ctx, func(tx storage.Tx) error {
		salt := make([]byte, 16)
		if _, err := rand.Read(salt); err != nil {
			return fault.Internalf(err, "salt")
		}
		m, err := tx.GetMerchantByClientID(mo.ClientID)
		switch {
		case err == nil:
			created = false
		case fault.Is(err, fault.NotFound):
			created = true
			m = &storage.Merchant{ID: l.opts.IDs.NewID("merchant"), Name: mo.Name, ClientID: mo.ClientID,
				Sandbox: mo.Sandbox, RequireAck: mo.RequireAck, CreatedAt: tx.Now(),
				FeeBasisPoints: mo.FeeBasisPoints, FeeFixedPerCapture: mo.FeeFixedPerCapture}
		default:
			return err
		}
		// The same secret again (every restart of a server given its
		// credentials) keeps its hash: access tokens are bound to it
		// (CredentialTag), and only a new secret should end them.
		if created || subtle.ConstantTimeCompare(hashSecret(m.Salt, mo.ClientSecret), m.SecretHash) != 1 {
			m.Salt, m.SecretHash = salt, hashSecret(salt, mo.ClientSecret)
		}
		creds = Credentials{MerchantID: m.ID, ClientID: m.ClientID, ClientSecret: mo.ClientSecret}
		return tx.PutMerchant(m)
	})
	return creds, created, err
}

// Authenticate checks a client id and secret and returns the merchant.
func (l *Ledger) Authenticate(ctx context.Context, clientID, secret string) (*storage.Merchant, error) {
	var m *storage.Merchant
	err := l.store.View(ctx, func(tx storage.Tx) error {
		var err error
		m, err = tx.GetMerchantByClientID(clientID)
		return err
	})
	if err != nil {
		if fault.Is(err, fault.NotFound) {
			return nil, fault.New(fault.Unauthorized, "unauthorized", "unknown client or wrong secret")
		}
		return nil, err
	}
	if subtle.ConstantTimeCompare(hashSecret(m.Salt, secret), m.SecretHash) != 1 {
		return nil, fault.New(fault.Unauthorized, "unauthorized", "unknown client or wrong secret")
	}
	return m, nil
}

// CredentialTag names a merchant's current client secret without revealing
// it: access tokens carry it, so that setting a new secret ends the tokens
// the old one obtained.
func CredentialTag(m *storage.Merchant) string {
	h := sha256.New()
	h.Write([]byte("kassa credential\x00"))
	h.Write(m.SecretHash)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}

// Merchant reads a merchant by id.
func (l *Ledger) Merchant(ctx context.Context, id string) (*storage.Merchant, error) {
	var m *storage.Merchant
	err := l.store.View(ctx, func(tx storage.Tx) error {
		var err error
		m, err = tx.GetMerchant(id)
		return err
	})
	return m, err
}

// HasMerchants reports whether the store holds any merchant.
func (l *Ledger) HasMerchants(ctx context.Context) (bool, error) {
	var any bool
	err := l.store.View(ctx, func(tx storage.Tx) error {
		var err error
		any, err = tx.HasMerchants()
		return err
	})
	return any, err
}
