package postgres

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestExplainListPlans loads 100 000 orders of one merchant (plus 10 000 of
// another) and prints, for the common list filters, the first-page time and
// PostgreSQL's EXPLAIN ANALYZE of the query ListOrders runs. It is how
// docs/postgres.md was made: KASSA_EXPLAIN=1 KASSA_TEST_DATABASE_URL=…
// go test -run ExplainListPlans -v ./storage/postgres/
func TestExplainListPlans(t *testing.T) {
	if os.Getenv("KASSA_EXPLAIN") == "" {
		t.Skip("KASSA_EXPLAIN not set: the plan dump loads 110 000 orders")
	}
	ctx := context.Background()
	s, err := Open(ctx, pgtest.FreshSchema(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f := ordertest.New()
	methods := []order.PaymentMethod{{Provider: order.ProviderService, Type: order.PayInvoice}, {Provider: order.ProviderService, Type: order.PayCard},
		{Provider: order.ProviderExternal, Type: order.PayInvoice}, {Provider: order.ProviderService, Type: order.PayBankTransfer}}
	uncaptured := f.Order(t)
	captured := f.Order(t)
	if _, err := capture.Full(captured, nil, f.Env()); err != nil {
		t.Fatal(err)
	}
	cancelled := f.Order(t)
	if err := cancelled.Cancel(f.Env()); err != nil {
		t.Fatal(err)
	}
	// 3/7 fully captured, 1/7 cancelled, the rest uncaptured; 20 stores; one minute apart.
	templates := []*order.Order{uncaptured, captured, uncaptured, captured, cancelled, uncaptured, captured}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	build := func(merchant string, i int) *order.Order {
		o := templates[i%len(templates)].Clone()
		o.MerchantID, o.ID = merchant, fmt.Sprintf("%s-%06d", merchant, i)
		o.StoreID, o.MerchantReference = fmt.Sprint("store-", i%20), fmt.Sprint("ref-", i)
		o.PaymentMethod = methods[i%len(methods)]
		o.CreatedAt = start.Add(time.Duration(i) * time.Minute)
		o.UpdatedAt, o.ExpiresAt = o.CreatedAt, o.CreatedAt.Add(28*24*time.Hour)
		return o
	}
	for _, m := range []struct {
		id string
		n  int
	}{{"m1", 100_000}, {"m2", 10_000}} {
		for from := 0; from < m.n; from += 2000 {
			if err := s.Update(ctx, func(tx storage.Tx) error {
				for i := from; i < min(from+2000, m.n); i++ {
					if err := tx.CreateOrder(build(m.id, i)); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE orders"); err != nil {
		t.Fatal(err)
	}
	day := start.Add(40 * 24 * time.Hour)
	queries := []struct {
		name string
		q    storage.OrderQuery
	}{
		{"no filter", storage.OrderQuery{}},
		{"storeId=store-3", storage.OrderQuery{StoreIDs: []string{"store-3"}}},
		{"status=fullyCaptured", storage.OrderQuery{Status: []order.Status{order.StatusFullyCaptured}}},
		{"storeId=store-3 + status=fullyCaptured", storage.OrderQuery{StoreIDs: []string{"store-3"}, Status: []order.Status{order.StatusFullyCaptured}}},
		{"statusNot=cancelled", storage.OrderQuery{StatusNot: []order.Status{order.StatusCancelled}}},
		{"merchantReference (q)", storage.OrderQuery{Q: "ref-4242"}},
		{"createdFrom/To (one day)", storage.OrderQuery{CreatedFrom: day, CreatedTo: day.Add(24 * time.Hour)}},
		{"expiresFrom/To (one day)", storage.OrderQuery{ExpiresFrom: day, ExpiresTo: day.Add(24 * time.Hour)}},
		{"paymentMethodCategory=card", storage.OrderQuery{Categories: []order.Category{methods[1].Category()}}},
	}
	var doc strings.Builder
	for _, c := range queries {
		var n int
		began := time.Now()
		if err := s.View(ctx, func(tx storage.Tx) error {
			page, err := tx.ListOrders("m1", c.q)
			n = len(page.Orders)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		took := time.Since(began)
		w, err := orderWhere("m1", c.q)
		if err != nil {
			t.Fatal(err)
		}
		sql := `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) SELECT body FROM orders WHERE ` + strings.Join(w.conds, " AND ") +
			` ORDER BY created_key DESC, id DESC LIMIT ` + w.arg(101)
		rows, err := s.pool.Query(ctx, sql, w.args...)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&doc, "#### %s: %d orders, first page %.1f ms\n\n    WHERE %s\n", c.name, n, float64(took.Microseconds())/1000, strings.Join(w.conds, " AND "))
		for rows.Next() {
			var line string
			rows.Scan(&line)
			fmt.Fprintf(&doc, "    %s\n", line)
		}
		rows.Close()
		doc.WriteString("\n")
	}
	t.Log("\n" + doc.String())
	if out := os.Getenv("KASSA_EXPLAIN_OUT"); out != "" {
		os.WriteFile(out, []byte(doc.String()), 0o644)
	}
}
