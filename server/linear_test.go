package server

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/internal/linear"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/memory"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// Concurrent histories must be linearizable: captures, refunds, cancels,
// edits, reference changes, GETs and lists sent at once to a few orders,
// through the real router of one server on bbolt and on memory, and of two
// replicas (each its own ledger and caches) on one PostgreSQL schema when
// KASSA_TEST_DATABASE_URL is set. Every answer of every order must come from
// one order of its operations, each taking effect between its request and
// its answer, run on the sequential model of internal/linear; a stale read
// from a cache (a GET after a change was answered, on this replica or the
// other, showing the order before it) or a lost update fails it.
//
// KASSA_LINEAR_RUNS sets the runs per store (default 3: about a second).
func TestConcurrentHistoriesAreLinearizable(t *testing.T) {
	runs := 3
	if s := os.Getenv("KASSA_LINEAR_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	stores := []struct {
		name string
		open func(t *testing.T) []storage.Store
	}{
		{"bolt", func(t *testing.T) []storage.Store {
			st, err := bolt.Open(filepath.Join(t.TempDir(), "k.db"), bolt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return []storage.Store{st}
		}},
		{"memory", func(t *testing.T) []storage.Store { return []storage.Store{memory.New(nil)} }},
		{"postgres", func(t *testing.T) []storage.Store {
			u := pgtest.FreshSchema(t)
			var sts []storage.Store
			for range 2 {
				st, err := postgres.Open(context.Background(), u, postgres.Options{MaxConns: 6})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				sts = append(sts, st)
			}
			return sts
		}},
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			for run := range runs {
				sts := s.open(t)
				c := linear.Cluster{Auth: basic("lin", "lin-secret")}
				for _, st := range sts {
					r := newMixReplica(t, st)
					if _, _, err := r.ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{ClientID: "lin", ClientSecret: "lin-secret"}); err != nil {
						t.Fatal(err)
					}
					c.Bases = append(c.Bases, r.url)
				}
				tally, err := linear.Verify(context.Background(), c, linear.Workload{Orders: 3, Clients: 5, OpsPerOrder: 50, Seed: uint64(run + 1)})
				if err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				t.Logf("run %d: %v", run, tally)
			}
		})
	}
}

// The check fails histories that are not linearizable: a recorded history
// with a read of the order as created added after everything (a stale
// cache), and one where an acknowledged change of reference is turned into
// a refusal while later answers still show it (a lost update, as the
// client saw it), are both refused.
func TestLinearizabilityCheckFailsInjectedHistories(t *testing.T) {
	r := newMixReplica(t, memory.New(nil))
	if _, _, err := r.ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{ClientID: "lin", ClientSecret: "lin-secret"}); err != nil {
		t.Fatal(err)
	}
	c := linear.Cluster{Bases: []string{r.url}, Auth: basic("lin", "lin-secret")}
	hs, err := linear.Record(context.Background(), c, linear.Workload{Orders: 1, Clients: 4, OpsPerOrder: 60, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	h := hs[0]
	if res, why := h.Check(); res != linear.Ok {
		t.Fatalf("the recorded history: %v\n%s", res, why)
	}
	var last int64
	changed := false
	for _, op := range h.Ops {
		last = max(last, op.Return)
		changed = changed || op.In.Kind != "get" && op.In.Kind != "list" && op.Out.Status == 200
	}
	if !changed {
		t.Fatal("the workload changed nothing")
	}
	stale := h
	stale.Ops = append(slices.Clone(h.Ops), linear.Op[linear.OrderIn, linear.OrderOut]{Client: 9, Call: last + 1, Return: last + 2,
		In: linear.OrderIn{Kind: "get"}, Out: linear.OrderOut{Status: 200, Obs: h.Init.Obs()}})
	if res, _ := stale.Check(); res != linear.Illegal {
		t.Errorf("a read of the order as created after every change: %v", res)
	}
	lost := h
	lost.Ops = slices.Clone(h.Ops)
	found := false
	for i, op := range lost.Ops {
		if op.In.Kind != "reference" || op.Out.Status != 200 {
			continue
		}
		for _, later := range lost.Ops {
			if later.Call > op.Return && strings.Contains(later.Out.Obs, strconv.Quote(op.In.Ref)) {
				lost.Ops[i].Out = linear.OrderOut{Status: 409, Code: "action_not_available"}
				found = true
				break
			}
		}
		if found {
			break
		}
	}
	if !found {
		t.Fatal("no reference change was seen by a later answer")
	}
	if res, _ := lost.Check(); res != linear.Illegal {
		t.Errorf("a change refused that later answers show: %v", res)
	}
}
