package postgres

import (
	"context"
	"testing"

	"github.com/kassahq/kassa/storage/postgres/pgtest"
	"github.com/kassahq/kassa/storage/storagetest"
)

// A claim with few notifications due costs in proportion to them, not to
// the merchants with one pending later: the skip scan visited every such
// merchant at every claim, two or more a second per replica (50 000 of
// them: 260 to 280 ms of the database per claim).
func TestClaimWithFewDueRunsNoSkipScan(t *testing.T) {
	s, err := Open(context.Background(), pgtest.FreshSchema(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storagetest.ClaimFewDueAmongManyPending(t, s, 500)
	if n := s.outboxSkipScans.Load(); n != 0 {
		t.Fatalf("the claim ran the skip scan over the 500 merchants with pending messages %d times, want 0 (4 are due)", n)
	}
}
