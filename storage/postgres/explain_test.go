package postgres

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
	"github.com/kassahq/kassa/token"
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
		where := strings.Join(w.conds, " AND ")
		sql := `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) ` + listSQL(w, 100, storage.MaxPageBytes)
		plan := explainLines(t, s.pool, sql, w.args...)
		fmt.Fprintf(&doc, "#### %s: %d orders, first page %.1f ms\n\n    WHERE %s\n", c.name, n, float64(took.Microseconds())/1000, where)
		for _, line := range plan {
			fmt.Fprintf(&doc, "    %s\n", line)
		}
		doc.WriteString("\n")
	}
	t.Log("\n" + doc.String())
	if out := os.Getenv("KASSA_EXPLAIN_OUT"); out != "" {
		os.WriteFile(out, []byte(doc.String()), 0o644)
	}
}

// TestExplainSessionPlans loads 20 000 sessions of one merchant (plus 2 000
// of another) and prints, for each session list filter, the first-page time
// and the EXPLAIN ANALYZE of the chunk query ListSessions runs; it fails when
// an indexed filter's plan does not use its index or reads the table
// sequentially. docs/postgres.md shows its output: KASSA_EXPLAIN=1
// KASSA_TEST_DATABASE_URL=… go test -run ExplainSessionPlans -v ./storage/postgres/
func TestExplainSessionPlans(t *testing.T) {
	if os.Getenv("KASSA_EXPLAIN") == "" {
		t.Skip("KASSA_EXPLAIN not set: the plan dump loads 22 000 sessions")
	}
	ctx := context.Background()
	s, err := Open(ctx, pgtest.FreshSchema(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	ids := idFunc(func(kind string) string { n++; return fmt.Sprintf("%s-%06d", kind, n) })
	for _, m := range []struct {
		id string
		n  int
	}{{"m1", 20_000}, {"m2", 2_000}} {
		for from := 0; from < m.n; from += 2000 {
			if err := s.Update(ctx, func(tx storage.Tx) error {
				for i := from; i < min(from+2000, m.n); i++ {
					r := &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
						StoreID: fmt.Sprint("store-", i%20), MerchantReference: fmt.Sprint("PO-", i),
						OrderLines:       []order.LineInput{{Description: ptr("x"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(1000)), Vat: ptr(int64(2500))}},
						ExpiresInMinutes: ptr(int64(session.MaxTTLMinutes))}
					created := start.Add(time.Duration(i) * time.Minute)
					ss, err := session.New(m.id, session.SourceCheckout, r, ids, created, func(id string) string { return "/checkout/" + id })
					if err != nil {
						return err
					}
					if i%10 == 0 {
						ss.State, ss.OrderID, ss.UpdatedAt = session.StateCompleted, fmt.Sprint("order-", i), created.Add(time.Hour)
					}
					if err := tx.PutSession(ss); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE sessions"); err != nil {
		t.Fatal(err)
	}
	day := start.Add(4 * 24 * time.Hour)
	queries := []struct {
		name, index string // index: the one the plan must use ("" for filters without one)
		q           session.Query
	}{
		{"no filter", "sessions_created", session.Query{}},
		{"orderId=nope", "sessions_order", session.Query{OrderIDs: []string{"nope"}}},
		{"orderId (two)", "sessions_order", session.Query{OrderIDs: []string{"order-1230", "order-40"}}},
		{"merchantReference", "sessions_merchant_ref", session.Query{MerchantReferences: []string{"PO-4242"}}},
		{"storeId=store-3", "sessions_store", session.Query{StoreIDs: []string{"store-3"}}},
		{"storeId=store-3 + merchantReference", "", session.Query{StoreIDs: []string{"store-3"}, MerchantReferences: []string{"PO-4243"}}},
		{"createdFrom/To (one day)", "sessions_created", session.Query{CreatedFrom: day, CreatedTo: day.Add(24 * time.Hour)}},
		{"updatedFrom/To (one hour)", "sessions_updated", session.Query{UpdatedFrom: day, UpdatedTo: day.Add(time.Hour)}},
		{"state=completed (no index)", "", session.Query{States: []session.State{session.StateCompleted}}},
		{"q (no index)", "", session.Query{Q: "PO-4242"}},
	}
	var doc strings.Builder
	for _, c := range queries {
		c.q.Size = 100
		var got int
		began := time.Now()
		if err := s.View(ctx, func(tx storage.Tx) error {
			page, _, err := tx.ListSessions("m1", c.q)
			got = len(page)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		took := time.Since(began)
		conds, args := sessionWhere(c.q)
		where := strings.Join(append([]string{"merchant_id = $1"}, conds...), " AND ")
		sql := `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) ` + chunkSQL("sessions", where, len(args)+1, false)
		plan := explainLines(t, s.pool, sql, append(append([]any{"m1"}, args...), storage.SessionPageBudget(c.q), min(c.q.Size+1, pageChunk))...)
		text := strings.Join(plan, "\n")
		if strings.Contains(text, "Seq Scan") || c.index != "" && !strings.Contains(text, c.index) {
			t.Errorf("%s: the plan does not use %s:\n%s", c.name, c.index, text)
		}
		fmt.Fprintf(&doc, "#### %s: %d sessions, first page %.1f ms\n\n    WHERE %s\n", c.name, got, float64(took.Microseconds())/1000, where)
		for _, line := range plan {
			fmt.Fprintf(&doc, "    %s\n", line)
		}
		doc.WriteString("\n")
	}
	t.Log("\n" + doc.String())
	if out := os.Getenv("KASSA_EXPLAIN_OUT"); out != "" {
		os.WriteFile(out, []byte(doc.String()), 0o644)
	}
}

type idFunc func(kind string) string

func (f idFunc) NewID(kind string) string { return f(kind) }

func ptr[T any](v T) *T { return &v }

// explainLines runs an EXPLAIN statement on db (the pool, or a transaction
// with settings of its own) and returns its plan, a line each.
func explainLines(t *testing.T, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestOpenEndedToFiltersBoundTheNewestFirstScan checks that expiresTo (orders)
// and updatedTo (sessions) alone also bound the creation time, which they
// imply: the plan that walks the merchant newest first (the one PostgreSQL
// picked on a large table, made certain here with enable_sort off) starts at
// that time instead of reading every row that expires, or was updated,
// later. Without the bound, 2.2 s for an expiresTo half a year back on a
// merchant of 400 000 orders (docs/postgres.md).
func TestOpenEndedToFiltersBoundTheNewestFirstScan(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.FreshSchema(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f := ordertest.New()
	tmpl := f.Order(t)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	ids := idFunc(func(kind string) string { n++; return fmt.Sprintf("%s-%06d", kind, n) })
	// 2 000 orders and sessions an hour apart; each order expires, and
	// each session is updated, a day after it was made.
	if err := s.Update(ctx, func(tx storage.Tx) error {
		for i := range 2000 {
			created := start.Add(time.Duration(i) * time.Hour)
			o := tmpl.Clone()
			o.MerchantID, o.ID = "m1", fmt.Sprintf("o-%06d", i)
			o.CreatedAt, o.UpdatedAt, o.ExpiresAt = created, created, created.Add(24*time.Hour)
			if err := tx.CreateOrder(o); err != nil {
				return err
			}
			ss, err := session.New("m1", session.SourceCheckout, &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
				OrderLines: []order.LineInput{{Description: ptr("x"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(1000)), Vat: ptr(int64(2500))}}},
				ids, created, func(id string) string { return "/checkout/" + id })
			if err != nil {
				return err
			}
			ss.UpdatedAt = created.Add(24 * time.Hour)
			if err := tx.PutSession(ss); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE orders, sessions"); err != nil {
		t.Fatal(err)
	}
	to := start.Add(40 * 24 * time.Hour) // 936 rows match, 1 064 expire later
	w, err := orderWhere("m1", storage.OrderQuery{ExpiresTo: to})
	if err != nil {
		t.Fatal(err)
	}
	conds, args := sessionWhere(session.Query{UpdatedTo: to})
	for _, c := range []struct {
		name, sql string
		args      []any
	}{
		{"orders expiresTo", listSQL(w, 100, storage.MaxPageBytes), w.args},
		{"sessions updatedTo", chunkSQL("sessions", strings.Join(append([]string{"merchant_id = $1"}, conds...), " AND "), len(args)+1, false),
			append(append([]any{"m1"}, args...), storage.MaxPageBytes, 101)},
	} {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL enable_sort = off"); err != nil {
			t.Fatal(err)
		}
		plan := explainLines(t, tx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+c.sql, c.args...)
		tx.Rollback(ctx)
		text := strings.Join(plan, "\n")
		removed := 0
		for _, line := range plan {
			if _, after, ok := strings.Cut(line, "Rows Removed by Filter: "); ok {
				var k int
				fmt.Sscan(after, &k)
				removed += k
			}
		}
		// Only the rows made in the day before the bound, not the 1 063
		// made after it.
		if removed > 30 || !strings.Contains(text, "rows=101") {
			t.Errorf("%s: %d rows read and passed over:\n%s", c.name, removed, text)
		}
	}
}

// TestListsArePlannedForTheirValues: a list statement is planned for the
// values of each request, never with a generic plan. pgx prepares each
// statement once per connection (cache_statement, the default), and after
// five executions PostgreSQL may run it with a plan made without the values
// when that plan's estimate is no worse than the average of the earlier
// ones: then a status filter, whose plan depends on the merchant's size and
// the status (walk the merchant newest first, or intersect the status index
// with the merchant), kept one plan for every merchant. Seen on a store of
// 1 000 000 orders: the big merchant's status=fullyCaptured took 760 ms
// instead of 0.35 ms from the moment a connection switched
// (docs/postgres.md).
func TestListsArePlannedForTheirValues(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.FreshSchema(t), Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f := ordertest.New()
	uncaptured := f.Order(t)
	cancelled := f.Order(t)
	if err := cancelled.Cancel(f.Env()); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.Update(ctx, func(tx storage.Tx) error {
		for i := range 400 {
			o := uncaptured.Clone()
			if i%10 == 0 {
				o = cancelled.Clone()
			}
			o.MerchantID, o.ID = "m1", fmt.Sprintf("o-%06d", i)
			if i%20 == 0 {
				o.MerchantID = "m2"
			}
			o.CreatedAt = start.Add(time.Duration(i) * time.Minute)
			o.UpdatedAt, o.ExpiresAt = o.CreatedAt, o.CreatedAt.Add(28*24*time.Hour)
			if err := tx.CreateOrder(o); err != nil {
				return err
			}
			ss, err := session.New(o.MerchantID, session.SourceCheckout, &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
				StoreID:    fmt.Sprint("store-", i%3),
				OrderLines: []order.LineInput{{Description: ptr("x"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(1000)), Vat: ptr(int64(2500))}}},
				idFunc(func(string) string { return fmt.Sprintf("s-%06d", i) }), o.CreatedAt, func(id string) string { return "/checkout/" + id })
			if err != nil {
				return err
			}
			if err := tx.PutSession(ss); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE orders, sessions"); err != nil {
		t.Fatal(err)
	}
	const runs = 12
	type counts struct{ generic, custom int64 }
	got := map[string]counts{}
	if err := s.View(ctx, func(v storage.Tx) error {
		for i := range runs {
			m := []string{"m1", "m2"}[i%2]
			page, err := v.ListOrders(m, storage.OrderQuery{Status: []order.Status{order.StatusCancelled}, Size: 10})
			if err != nil {
				return err
			}
			if len(page.Orders) != 10 {
				t.Errorf("run %d: %d cancelled orders of %s", i, len(page.Orders), m)
			}
			if _, _, err := v.ListSessions(m, session.Query{StoreIDs: []string{"store-1"}, Size: 10}); err != nil {
				return err
			}
		}
		// The same connection: the statements it prepared, and how each
		// was planned.
		rows, err := v.(*tx).tx.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var sql string
			var c counts
			if err := rows.Scan(&sql, &c.generic, &c.custom); err != nil {
				return err
			}
			for _, table := range []string{"orders", "sessions"} {
				if strings.Contains(sql, "octet_length(body) AS len, body FROM "+table+" WHERE") {
					got[table] = c
				}
			}
		}
		return rows.Err()
	}); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"orders", "sessions"} {
		if c := got[table]; c.generic != 0 || c.custom != runs {
			t.Errorf("the %s list ran %d times: %d generic plans, %d planned for its values, want 0 and %d", table, runs, c.generic, c.custom, runs)
		}
	}
}

// The retention sweeps read their index from the oldest row and delete the
// rows they locked by position, whatever the limit: of 20 000 rows each,
// EXPLAIN of the whole DELETE, at the limit the server sweeps with and at
// ten times it, walks the index and reads no table in sequence. A sweep
// that named its rows by key ((merchant_id, token) IN (…)) was joined back
// by a nested loop at 500 but a hash semi-join over a Seq Scan of the whole
// table at 5 000 (on 300 000 tokens, 10 ms and 240 ms; docs/postgres.md).
func TestSweepsUseTheirIndexesAtAnyLimit(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.FreshSchema(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 20_000
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var tokens, keys, messages [][]any
	for i := range n {
		at := start.Add(time.Duration(i) * time.Minute)
		a := &token.Authorization{Token: fmt.Sprintf("at%05d", i), MerchantID: fmt.Sprint("m", i%7),
			Country: "SE", Currency: "SEK", CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
		r := &storage.IdempotencyRecord{MerchantID: a.MerchantID, Key: fmt.Sprintf("k%05d", i), ExpiresAt: at.Add(24 * time.Hour)}
		ab, err := encode("authorization token", a)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := encode("idempotency record", r)
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, []any{a.MerchantID, a.Token, ab})
		keys = append(keys, []any{r.MerchantID, r.Key, timeKey(r.ExpiresAt), rb})
		// One message in 50 still pending, the rest done.
		messages = append(messages, []any{fmt.Sprintf("n%05d", i), a.MerchantID, timeKey(at), timeKey(at), i%50 != 0, []byte(`{}`)})
	}
	for _, l := range []struct {
		table string
		cols  []string
		rows  [][]any
	}{
		{"auth_tokens", []string{"merchant_id", "token", "body"}, tokens},
		{"idempotency", []string{"merchant_id", "key", "expires_key", "body"}, keys},
		{"outbox", []string{"id", "merchant_id", "created_key", "next_key", "done", "body"}, messages},
	} {
		if _, err := s.pool.CopyFrom(ctx, pgx.Identifier{l.table}, l.cols, pgx.CopyFromRows(l.rows)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, "ANALYZE "+l.table); err != nil {
			t.Fatal(err)
		}
	}
	// Half of each table is past the cutoff.
	cutoff := timeKey(start.Add(n / 2 * time.Minute))
	for _, c := range []struct{ sweep, sql, index string }{
		{"authorization token", authTokensSweepSQL, "auth_tokens_expires"},
		{"idempotency", idempotencySweepSQL, "idempotency_expires"},
		{"notification", outboxSweepSQL, "outbox_done"},
	} {
		for _, limit := range []int{500, 5000} {
			tx, err := s.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			plan := strings.Join(explainLines(t, tx, `EXPLAIN (COSTS OFF) `+c.sql, cutoff, limit), "\n")
			tx.Rollback(ctx)
			if !strings.Contains(plan, c.index) || strings.Contains(plan, "Seq Scan") {
				t.Errorf("the %s sweep of %d does not walk %s alone:\n%s", c.sweep, limit, c.index, plan)
			}
		}
	}
	var removed int
	if err := s.Update(ctx, func(tx storage.Tx) error {
		removed, err = tx.DeleteAuthorizationsExpiredBefore(start.Add(62*time.Minute), 100)
		return err
	}); err != nil || removed != 2 {
		t.Fatalf("the sweep up to the third token's expiry removed %d (%v); want 2", removed, err)
	}
}

// TestStatusFiltersReadTheMerchantsOwnEntries: a small merchant's rare
// status is read from orders_merchant_statuses (migration 13), its own
// entries of the status, not intersected with those of every merchant in
// orders_statuses; the big merchant's common status still walks
// orders_created newest first. Bodies are one order's, cloned in SQL: only
// the plans are looked at.
func TestStatusFiltersReadTheMerchantsOwnEntries(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.FreshSchema(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('orders_merchant_statuses') IS NOT NULL`).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists {
		t.Skip("no btree_gin on this database: migration 13 is pending")
	}
	f := ordertest.New()
	tmpl := f.Order(t)
	tmpl.MerchantID, tmpl.ID = "tmpl", "tmpl"
	if err := s.Update(ctx, func(tx storage.Tx) error { return tx.CreateOrder(tmpl) }); err != nil {
		t.Fatal(err)
	}
	// big: 30 000 orders, other: 20 000, small: 1 000; every 12th
	// cancelled. In time order, merchants interleaved. The small merchant's
	// 84 cancelled do not fill a page: a walk reads all its orders.
	if _, err := s.pool.Exec(ctx, `INSERT INTO orders (merchant_id, id, version, store_id, order_ref, merchant_ref, category, statuses,
			created_key, expires_key, expirable, body)
		SELECT m, m || '-' || i, 1, 'store-1', '', '', 'invoice',
			CASE WHEN i % 12 = 0 THEN '{cancelled}'::text[] ELSE '{fullyCaptured}'::text[] END,
			'\x80000000'::bytea || int4send(1767225600 + i * (60000 / n)) || '\x00000000'::bytea,
			'\x80000000'::bytea || int4send(1769817600 + i * (60000 / n)) || '\x00000000'::bytea, false, o.body
		FROM (VALUES ('big', 30000), ('other', 20000), ('small', 1000)) ms (m, n),
			generate_series(0, n - 1) i, (SELECT body FROM orders WHERE merchant_id = 'tmpl') o
		ORDER BY 1767225600 + i * (60000 / n)`); err != nil {
		t.Fatal(err)
	}
	// VACUUM also moves the GIN indexes' pending lists into their trees,
	// as autovacuum does on a live table.
	if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE orders"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		merchant, want string
		q              storage.OrderQuery
	}{
		{"small", "Bitmap Index Scan on orders_merchant_statuses", storage.OrderQuery{Status: []order.Status{order.StatusCancelled}}},
		{"small", "Bitmap Index Scan on orders_merchant_statuses", storage.OrderQuery{StatusAnd: []order.Status{order.StatusCancelled}}},
		{"big", "Index Scan using orders_created", storage.OrderQuery{Status: []order.Status{order.StatusCancelled}}},
		{"big", "Index Scan using orders_created", storage.OrderQuery{Status: []order.Status{order.StatusFullyCaptured}}},
	} {
		w, err := orderWhere(c.merchant, c.q)
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(explainLines(t, s.pool, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+listSQL(w, 100, storage.MaxPageBytes), w.args...), "\n")
		if !strings.Contains(plan, c.want) || strings.Contains(plan, "orders_statuses") || strings.Contains(plan, "orders_pkey") {
			t.Errorf("%s %+v: want %s, not orders_statuses or orders_pkey:\n%s", c.merchant, c.q, c.want, plan)
		}
		if c.merchant == "small" && !strings.Contains(plan, "WindowAgg (actual rows=84 loops=1)") {
			t.Errorf("%s %+v: want its 84 cancelled orders:\n%s", c.merchant, c.q, plan)
		}
	}
}

// TestLoadLeavesStatisticsForThePlanner: a store copy (Load) leaves the
// planner statistics of what it loaded. Without them, until autovacuum's
// first ANALYZE, the planner took every range condition to match a third of
// the table: the idempotency sweep, which runs every minute and finds
// nothing expired right after a copy, read the whole table by a Seq Scan
// (168 ms on 300 000 records), and a status filter of the big merchant of 1
// 000 000 orders took 0.9 s (docs/postgres.md, Moving from bolt).
// Autovacuum is off on the table here, so that only the load can have made
// them.
func TestLoadLeavesStatisticsForThePlanner(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.FreshSchema(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.pool.Exec(ctx, `ALTER TABLE idempotency SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 20_000
	if _, err := s.Load(ctx, func(put func(storage.Record) error) error {
		for i := range n {
			at := start.Add(time.Duration(i) * time.Second)
			r := &storage.IdempotencyRecord{MerchantID: fmt.Sprint("m", i%7), Key: fmt.Sprintf("k%05d", i), Status: 200,
				Body: []byte(`{"id":"o"}`), CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour)}
			b, err := encode("idempotency record", r)
			if err != nil {
				return err
			}
			if err := put(storage.Record{Kind: storage.KindIdempotency, MerchantID: r.MerchantID, ID: r.Key, Body: b}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var tuples float64
	var stats int
	if err := s.pool.QueryRow(ctx, `SELECT reltuples, (SELECT count(*) FROM pg_stats WHERE schemaname = current_schema()
		AND tablename = 'idempotency') FROM pg_class WHERE oid = 'idempotency'::regclass`).Scan(&tuples, &stats); err != nil {
		t.Fatal(err)
	}
	if tuples != n || stats == 0 {
		t.Errorf("after the load: reltuples %v and %d column statistics of idempotency; want %d and some", tuples, stats, n)
	}
	// And every table it loaded, the empty ones too (reltuples -1, from
	// PostgreSQL 14 on: never analyzed; autovacuum does not visit a table
	// nothing was written to).
	for _, table := range dataTables {
		if err := s.pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = $1::regclass`, table).Scan(&tuples); err != nil {
			t.Fatal(err)
		}
		if tuples < 0 {
			t.Errorf("after the load: %s has no statistics (reltuples %v)", table, tuples)
		}
	}
	// Nothing has expired at the first record's creation.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	plan := strings.Join(explainLines(t, tx, `EXPLAIN (COSTS OFF) `+idempotencySweepSQL, timeKey(start), 1000), "\n")
	if !strings.Contains(plan, "idempotency_expires") || strings.Contains(plan, "Seq Scan") {
		t.Errorf("the idempotency sweep after a load does not walk idempotency_expires:\n%s", plan)
	}
}
