package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
)

type seqIDs struct{ n int }

func (s *seqIDs) NewID(kind string) string { s.n++; return fmt.Sprintf("%s-%05d", kind, s.n) }

type noDocs struct{}

func (noDocs) Next(string) (int64, error) { return 0, fmt.Errorf("no documents here") }

// TestListWalksTheSmallestIndex checks how many candidates a list examines:
// the planner must walk the most selective index, not the merchant's orders.
func TestListWalksTheSmallestIndex(t *testing.T) {
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	s, err := Open(filepath.Join(t.TempDir(), "kassa.db"), Options{NoSync: true, Clock: func() time.Time { return start.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	ids := &seqIDs{}
	const n = 1000
	var orderIDs []string
	if err := s.Update(ctx, func(tx storage.Tx) error {
		for i := range n {
			req := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", StoreID: fmt.Sprint("store-", i%20),
				Reference:  fmt.Sprint("ref-", i%100),
				OrderLines: []order.LineInput{{Description: ptr("x"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(1000)), Vat: ptr(int64(2500))}}}
			lines, mode, err := order.ValidateCreate(req, false, ids)
			if err != nil {
				return err
			}
			pm := order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}
			if i%50 == 0 {
				pm.Type = order.PayBankTransfer
			}
			e := order.Env{Now: start.Add(time.Duration(i) * time.Second), IDs: ids, Docs: noDocs{}, Policy: order.DefaultPolicy()}
			o, err := order.Create("m1", req, lines, mode, order.Authorization{Country: "SE", Currency: "SEK", PaymentMethod: pm}, e)
			if err != nil {
				return err
			}
			if i%10 == 0 {
				if err := o.Cancel(e); err != nil {
					return err
				}
			}
			if err := tx.CreateOrder(o); err != nil {
				return err
			}
			orderIDs = append(orderIDs, o.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	exp := func(sec int) time.Time {
		return start.Add(time.Duration(sec)*time.Second + order.DefaultPolicy().ExpiryPeriod)
	}
	cases := []struct {
		name           string
		q              storage.OrderQuery
		found, checked int
	}{
		{"store", storage.OrderQuery{StoreIDs: []string{"store-3"}}, 50, 50},
		{"store+cancelled: the smaller index drives", storage.OrderQuery{StoreIDs: []string{"store-0"}, Status: []order.Status{order.StatusCancelled}}, 50, 50},
		{"two stores (100) + cancelled (100)", storage.OrderQuery{StoreIDs: []string{"store-3", "store-10"}, Status: []order.Status{order.StatusCancelled}}, 50, 100},
		{"category directBank (20) beats uncaptured (900)", storage.OrderQuery{Categories: []order.Category{order.CategoryDirectBank}, Status: []order.Status{order.StatusUncaptured}}, 0, 20},
		{"statusAnd: the rarest status drives", storage.OrderQuery{StatusAnd: []order.Status{order.StatusUncaptured, order.StatusCancelled}}, 0, 100},
		{"merchant reference", storage.OrderQuery{MerchantReferences: []string{"ref-7"}}, 10, 10},
		{"q", storage.OrderQuery{Q: "ref-7"}, 10, 10},
		{"ids", storage.OrderQuery{IDs: []string{orderIDs[2], orderIDs[5], "nope"}}, 2, 2},
		{"expires window", storage.OrderQuery{ExpiresFrom: exp(100), ExpiresTo: exp(130)}, 30, 30},
		{"created window", storage.OrderQuery{CreatedFrom: start.Add(500 * time.Second), CreatedTo: start.Add(540 * time.Second)}, 40, 40},
		{"statusNot streams and stops after a page", storage.OrderQuery{StatusNot: []order.Status{order.StatusCancelled}, Size: 10}, 10, 12},
	}
	for _, c := range cases {
		if err := s.View(ctx, func(stx storage.Tx) error {
			page, err := stx.ListOrders("m1", c.q)
			if err != nil {
				return err
			}
			if got := stx.(*tx).examined; len(page.Orders) != c.found || got != c.checked {
				t.Errorf("%s: %d orders after examining %d candidates, want %d after %d", c.name, len(page.Orders), got, c.found, c.checked)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }
