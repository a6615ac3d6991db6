package storagetest

import (
	"bytes"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
)

// testPagingUnderWrites: random interleavings of page reads and writes
// (orders captured, cancelled, given another reference or a later expiry,
// new orders at any creation time, ties included; sessions updated,
// authorized, cancelled, new ones) while one filtered walk pages through
// them with its cursor.
// After every page: no item twice, the walk newest first, every item on a
// page matching the filter as stored at the read, and every item that
// existed before the walk and matched its filter at every step since is on
// a page once the walk has passed its position. Each sequence uses a merchant
// of its own in the one store.
func testPagingUnderWrites(t *testing.T, s storage.Store) {
	var merchants atomic.Int64
	b := newBuilder()
	instants := func(rt *rapid.T, label string) time.Time {
		// Few instants, so that positions tie on the creation time.
		return Start().Add(time.Duration(rapid.IntRange(0, 5).Draw(rt, label)) * time.Second)
	}
	t.Run("orders", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) {
			m := fmt.Sprintf("pw-%d", merchants.Add(1))
			st, ref := func(ss ...order.Status) []order.Status { return ss }, fmt.Sprint
			queries := []storage.OrderQuery{
				{},
				{StoreIDs: []string{"store-1"}},
				{Status: st(order.StatusUncaptured)},
				{Status: st(order.StatusFullyCaptured, order.StatusCancelled)},
				{StatusNot: st(order.StatusCancelled)},
				{MerchantReferences: []string{"ref-1", "ref-2"}},
				{Categories: []order.Category{order.CategoryServiceInvoice, order.CategoryCard}},
				{CreatedFrom: Start().Add(time.Second), CreatedTo: Start().Add(4 * time.Second)},
				{StoreIDs: []string{"store-0", "store-2"}, Status: st(order.StatusUncaptured, order.StatusFullyCaptured)},
				{ExpiresTo: Start().Add(order.DefaultPolicy().ExpiryPeriod + 3*time.Second)},
				{ExpiresFrom: Start().Add(order.DefaultPolicy().ExpiryPeriod + 2*time.Second), StatusNot: st(order.StatusFullyCaptured)},
			}
			q := queries[rapid.IntRange(0, len(queries)-1).Draw(rt, "query")]
			q.Size = rapid.IntRange(1, 4).Draw(rt, "size")
			w := newWalk()
			// create makes n orders in one transaction (one commit: bbolt
			// syncs each).
			create := func(n int, before bool) {
				var os []*order.Order
				for range n {
					os = append(os, b.make(t, m, rapid.IntRange(0, 39).Draw(rt, "shape"), instants(rt, "created")))
				}
				err := s.Update(ctx, func(tx storage.Tx) error {
					for _, o := range os {
						if err := tx.CreateOrder(o); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					rt.Fatalf("create: %v", err)
				}
				for _, o := range os {
					w.add(o.ID, orderPos(o), before && storage.Matches(o, o.Statuses(o.UpdatedAt), q))
				}
			}
			create(rapid.IntRange(1, 20).Draw(rt, "orders"), true)
			for step := 0; !w.done && step < 200; step++ {
				switch op := rapid.IntRange(0, 6).Draw(rt, "op"); op {
				case 0, 1: // the next page
					var page storage.OrderPage
					err := s.View(ctx, func(tx storage.Tx) error {
						var err error
						page, err = tx.ListOrders(m, q)
						return err
					})
					if err != nil {
						rt.Fatalf("page after %q: %v", q.Cursor, err)
					}
					var got []listed
					for _, o := range page.Orders {
						got = append(got, listed{o.ID, orderPos(o), storage.Matches(o, o.Statuses(o.UpdatedAt), q)})
					}
					w.page(rt, "order", q.Size, got, page.NextCursor)
					q.Cursor = page.NextCursor
				case 2:
					create(1, false)
				default: // change an order: capture, cancel, its reference or its expiry
					id := rapid.SampledFrom(w.ids).Draw(rt, "order")
					var changed *order.Order
					err := s.Update(ctx, func(tx storage.Tx) error {
						o, err := tx.GetOrder(m, id)
						if err != nil {
							return err
						}
						env := b.env(Now())
						switch op {
						case 3:
							_, err = capture.Full(o, nil, env)
						case 4:
							err = o.Cancel(env)
						case 5:
							err = o.ExtendExpiry(env)
						default:
							r := ref("ref-", rapid.IntRange(0, 4).Draw(rt, "reference"))
							err = o.SetReference(&order.ReferenceRequest{Reference: &r}, env)
						}
						if err != nil {
							return nil // not allowed in its state: no change
						}
						changed = o
						return tx.UpdateOrder(o)
					})
					if err != nil {
						rt.Fatalf("change %s: %v", id, err)
					}
					if changed != nil {
						w.changed(id, storage.Matches(changed, changed.Statuses(changed.UpdatedAt), q))
					}
				}
			}
			if !w.done {
				rt.Fatalf("the walk did not end")
			}
		})
	})
	t.Run("sessions", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) {
			m := fmt.Sprintf("pws-%d", merchants.Add(1))
			queries := []session.Query{
				{},
				{StoreIDs: []string{"store-1"}},
				{States: []session.State{session.StateCreated}},
				{MerchantReferences: []string{"PO-1", "PO-2", "PO-3"}},
				{UpdatedFrom: Now().Add(-time.Hour)},
				{UpdatedFrom: Start(), UpdatedTo: Start().Add(3 * time.Second)},
				{CreatedFrom: Start().Add(time.Second), CreatedTo: Start().Add(4 * time.Second)},
				{Q: "po-"},
			}
			q := queries[rapid.IntRange(0, len(queries)-1).Draw(rt, "query")]
			q.Size = rapid.IntRange(1, 4).Draw(rt, "size")
			w := newWalk()
			sids := new(ids)
			create := func(n int, before bool) {
				var ss []*session.Session
				for i := range n { // i names its external id: one per session
					ss = append(ss, newSessionLines(t, sids, m, len(w.ids)+i, instants(rt, "created"), 0))
				}
				err := s.Update(ctx, func(tx storage.Tx) error {
					for _, s := range ss {
						if err := tx.PutSession(s); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					rt.Fatalf("create: %v", err)
				}
				for _, s := range ss {
					w.add(s.ID, position(s.CreatedAt, s.ID), before && q.Match(s, Now()))
				}
			}
			create(rapid.IntRange(1, 20).Draw(rt, "sessions"), true)
			for step := 0; !w.done && step < 200; step++ {
				switch op := rapid.IntRange(0, 5).Draw(rt, "op"); op {
				case 0, 1:
					var page []*session.Session
					var next string
					err := s.View(ctx, func(tx storage.Tx) error {
						var err error
						page, next, err = tx.ListSessions(m, q)
						return err
					})
					if err != nil {
						rt.Fatalf("page after %q: %v", q.FromID, err)
					}
					var got []listed
					for _, ss := range page {
						got = append(got, listed{ss.ID, position(ss.CreatedAt, ss.ID), q.Match(ss, Now())})
					}
					w.page(rt, "session", q.Size, got, next)
					q.FromID = next
				case 2:
					create(1, false)
				default:
					id := rapid.SampledFrom(w.ids).Draw(rt, "session")
					var changed *session.Session
					err := s.Update(ctx, func(tx storage.Tx) error {
						ss, err := tx.GetSession(m, id)
						if err != nil {
							return err
						}
						switch op {
						case 3:
							err = ss.Authorize(order.Customer{CompanyID: "5560000001"}, order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}, "at-"+id, time.Time{}, Now())
						case 4:
							err = ss.Cancel("", Now())
						default:
							r := fmt.Sprint("PO-", rapid.IntRange(0, 4).Draw(rt, "reference"))
							err = ss.Update(&session.UpdateRequest{MerchantReference: &r}, sids, Now())
						}
						if err != nil {
							return nil
						}
						changed = ss
						return tx.PutSession(ss)
					})
					if err != nil {
						rt.Fatalf("change %s: %v", id, err)
					}
					if changed != nil {
						w.changed(id, q.Match(changed, Now()))
					}
				}
			}
			if !w.done {
				rt.Fatalf("the walk did not end")
			}
		})
	})
}

// walk is one newest-first paging through a list while it changes, and
// what it must find.
type walk struct {
	items map[string]*walkItem
	ids   []string // every item, in creation order
	seen  []string // listed so far
	last  []byte   // the position of the last item listed
	done  bool     // a page came without a next cursor
}

type walkItem struct {
	pos    []byte
	always bool // existed before the walk and matched at every step since
}

// listed is an item on a page: its id, position and whether it matches the
// filter as stored at the read.
type listed struct {
	id      string
	pos     []byte
	matches bool
}

func newWalk() *walk { return &walk{items: map[string]*walkItem{}} }

func (w *walk) add(id string, pos []byte, always bool) {
	w.items[id] = &walkItem{pos: pos, always: always}
	w.ids = append(w.ids, id)
}

// changed records that id was written: it stays one that matched
// throughout only if it still matches.
func (w *walk) changed(id string, matches bool) {
	it := w.items[id]
	it.always = it.always && matches
}

// page checks the next page of the walk: no more than size items, none
// listed twice, newest first, each matching, and no item that matched
// throughout passed over.
func (w *walk) page(rt *rapid.T, what string, size int, got []listed, next string) {
	if len(got) > size {
		rt.Fatalf("page of %d %ss for size %d", len(got), what, size)
	}
	for _, l := range got {
		if slices.Contains(w.seen, l.id) {
			rt.Fatalf("%s listed twice (seen %v)", l.id, w.seen)
		}
		if w.last != nil && bytes.Compare(l.pos, w.last) >= 0 {
			rt.Fatalf("%s listed after an older %s (seen %v)", l.id, what, w.seen)
		}
		w.last = l.pos
		if !l.matches {
			rt.Fatalf("%s listed; it does not match the filter", l.id)
		}
		w.seen = append(w.seen, l.id)
	}
	w.done = next == ""
	for _, id := range w.ids {
		it := w.items[id]
		passed := w.done || w.last != nil && bytes.Compare(it.pos, w.last) >= 0
		if it.always && passed && !slices.Contains(w.seen, id) {
			rt.Fatalf("%s matched throughout and was passed over (seen %v)", id, w.seen)
		}
	}
}

// orderPos is an order's place in list order: creation time, then id.
func orderPos(o *order.Order) []byte { return position(o.CreatedAt, o.ID) }

// position sorts like the lists: creation time, then id.
func position(at time.Time, id string) []byte {
	return append(storage.AppendTimeKey(nil, at), id...)
}
