package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/storagetest"
)

// A claim with few messages due costs in proportion to them, not to the
// merchants with messages pending later: the skip scan visited every such
// merchant at every claim, two or more a second (50 000 of them: 7 to 20 ms
// per claim, under the writer's lock).
func TestClaimWithFewDueSkipsNoMerchant(t *testing.T) {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "k.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storagetest.ClaimFewDueAmongManyPending(t, s, 5000)
	if n := bolt.OutboxSkips(s); n != 0 {
		t.Fatalf("the claim visited %d merchants with pending messages, want 0 (4 messages are due)", n)
	}
}
