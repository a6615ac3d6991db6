package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kassahq/kassa"
)

// TestServerWithoutAKeyCannotBeForged: an embedder who leaves Config.Key
// out (nothing refused it) got a server that signed access tokens, checkout
// and document links with HMAC under the empty key, which anyone can
// compute: a merchant id (it is in every document link a buyer receives)
// was then all it took to act as that merchant. An empty key is now a
// random one, so nothing signed under the empty key is accepted.
func TestServerWithoutAKeyCannotBeForged(t *testing.T) {
	ledger := kassa.New(openStore(t, time.Now), kassa.Options{})
	creds, _, err := ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{ClientID: "nokey", ClientSecret: "nokey-secret-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range [][]byte{nil, {}} {
		h := New(Config{Ledger: ledger, Logger: quiet, Key: key}).Handler()
		payload, _ := json.Marshal(map[string]any{"m": creds.MerchantID, "e": time.Now().Add(time.Hour).Unix()})
		p := base64.RawURLEncoding.EncodeToString(payload)
		m := hmac.New(sha256.New, nil)
		m.Write([]byte("access\x00" + p))
		forged := "kat_" + p + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
		req := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
		req.Header.Set("Authorization", "Bearer "+forged)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("key %#v: a token signed with the empty key answered %d, want 401", key, rec.Code)
		}
	}
}

// TestServerRefusesAShortKey: a key shorter than the 32 bytes Config.Key
// asks for is a mistake of the embedder's (a password, a truncated
// secret), which New refuses at once rather than sign with.
func TestServerRefusesAShortKey(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New accepted a key of 8 bytes")
		}
	}()
	New(Config{Logger: quiet, Key: []byte("password")})
}
