package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/storagetest"
)

// A database indexed under older status rules is reindexed when a replica
// starts: a list filtered by the order's real status finds it (no 500 from
// the list's check that rows match), and one by the stale status does not.
func TestReindexStatusesOnOpen(t *testing.T) {
	dbURL := freshSchema(t)
	ctx := context.Background()
	s := open(t, dbURL)
	f := ordertest.New()
	o := f.Order(t)
	o.MerchantID = "m1"
	if err := s.Update(ctx, func(tx storage.Tx) error { return tx.CreateOrder(o) }); err != nil {
		t.Fatal(err)
	}
	// What older rules would have left: the column says onHold, and the
	// database records rules 1.
	if _, err := s.Pool().Exec(ctx, `UPDATE orders SET statuses = '{uncaptured,onHold}' WHERE id = $1`, o.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE store_info SET value = 1 WHERE name = 'statusRules'`); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = open(t, dbURL)
	list := func(st order.Status) []string {
		var ids []string
		err := s.View(ctx, func(tx storage.Tx) error {
			p, err := tx.ListOrders("m1", storage.OrderQuery{Status: []order.Status{st}})
			for _, o := range p.Orders {
				ids = append(ids, o.ID)
			}
			return err
		})
		if err != nil {
			t.Fatalf("list %s: %v", st, err)
		}
		return ids
	}
	if got := list(order.StatusReadyForCapture); !slices.Equal(got, []string{o.ID}) {
		t.Fatalf("readyForCapture lists %v, want the order", got)
	}
	if got := list(order.StatusOnHold); len(got) != 0 {
		t.Fatalf("onHold lists %v after the reindex", got)
	}
	var rules int64
	if err := s.Pool().QueryRow(ctx, `SELECT value FROM store_info WHERE name = 'statusRules'`).Scan(&rules); err != nil || rules != order.StatusRules {
		t.Fatalf("status rules recorded %d (%v), want %d", rules, err, order.StatusRules)
	}
}

// During a rolling upgrade a replica of the older build may write a statuses
// column under its rules. A list then goes by the orders' own statuses: a row
// the column alone matches is passed over, with no 500, and the pages after
// it are still reached.
func TestListPassesOverRowsIndexedByOtherRules(t *testing.T) {
	s := open(t, freshSchema(t))
	ctx := context.Background()
	f := ordertest.New()
	// Two orders on hold, then the newest, not on hold, whose column an older
	// build wrote with onHold: it comes first in the walk and is passed over.
	var held []string
	var newest string
	for i := range 3 {
		o := f.Order(t)
		o.MerchantID = "m1"
		if i < 2 {
			o.Hold = order.HoldOnHold
		}
		if err := s.Update(ctx, func(tx storage.Tx) error { return tx.CreateOrder(o) }); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			held = append(held, o.ID)
		}
		newest = o.ID
		f.Clock.Advance(time.Minute)
	}
	slices.Reverse(held) // newest first
	if _, err := s.Pool().Exec(ctx, `UPDATE orders SET statuses = statuses || '{onHold}' WHERE id = $1`, newest); err != nil {
		t.Fatal(err)
	}
	// Passed-over rows count against the page's byte budget too (they are
	// decoded): with a budget of one byte each page looks at one row.
	walk := func(st order.Status, size, pageBytes int) []string {
		var ids []string
		q := storage.OrderQuery{Status: []order.Status{st}, Size: size, PageBytes: pageBytes}
		for page := 0; page < 10; page++ {
			var p storage.OrderPage
			err := s.View(ctx, func(tx storage.Tx) error {
				var err error
				p, err = tx.ListOrders("m1", q)
				return err
			})
			if err != nil {
				t.Fatalf("list %s: %v", st, err)
			}
			for _, o := range p.Orders {
				ids = append(ids, o.ID)
			}
			if p.NextCursor == "" {
				return ids
			}
			q.Cursor = p.NextCursor
		}
		t.Fatalf("list %s: more than 10 pages", st)
		return nil
	}
	for _, c := range []struct{ size, pageBytes int }{{1, 0}, {5, 0}, {1, 1}, {5, 1}} {
		if got := walk(order.StatusOnHold, c.size, c.pageBytes); !slices.Equal(got, held) {
			t.Fatalf("%+v: onHold lists %v, want %v", c, got, held)
		}
		if got := walk(order.StatusReadyForCapture, c.size, c.pageBytes); !slices.Equal(got, []string{newest}) {
			t.Fatalf("%+v: readyForCapture lists %v, want %v", c, got, []string{newest})
		}
	}
}

// A sweep stopped part way (a replica killed during its start) goes on from
// the position its last batch committed, and ends by recording the rules.
func TestReindexResumesFromItsPosition(t *testing.T) {
	dbURL := freshSchema(t)
	ctx := context.Background()
	s := open(t, dbURL)
	f := ordertest.New()
	var ids []string
	for range 2 {
		o := f.Order(t)
		o.MerchantID = "m1"
		if err := s.Update(ctx, func(tx storage.Tx) error { return tx.CreateOrder(o) }); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.ID)
	}
	slices.Sort(ids) // the sweep's order
	for _, q := range []string{
		`UPDATE orders SET statuses = '{uncaptured,onHold}'`,
		`UPDATE store_info SET value = 1 WHERE name = 'statusRules'`,
		`INSERT INTO store_info (name, value, position) VALUES ('statusRulesSweep', ` + strconv.Itoa(order.StatusRules) + `, '["m1","` + ids[0] + `"]')`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	s = open(t, dbURL)
	var swept []string
	rows, err := s.Pool().Query(ctx, `SELECT id FROM orders WHERE NOT ('onHold' = ANY(statuses)) ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		swept = append(swept, id)
	}
	if rows.Err() != nil || !slices.Equal(swept, ids[1:]) {
		t.Fatalf("swept %v (%v), want only %v: the sweep goes on after %s", swept, rows.Err(), ids[1:], ids[0])
	}
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM store_info WHERE name = 'statusRulesSweep'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("sweep row left: %d (%v)", left, err)
	}
}

// A database the previous build wrote (sessions without the filter columns
// of migration 6) gets them when replicas start, two at once: the filters
// find its sessions by store, reference and update time, and a row whose
// body cannot be decoded does not stop the start.
func TestSessionColumnsFilledOnOpen(t *testing.T) {
	dbURL := freshSchema(t)
	ctx := context.Background()
	s := open(t, dbURL)
	// Back to the schema of migration 5, with rows as that build wrote them.
	for _, sql := range []string{
		`ALTER TABLE sessions DROP COLUMN store_id, DROP COLUMN merchant_ref, DROP COLUMN updated_key`,
		`DELETE FROM schema_migrations WHERE version = 6`,
	} {
		if _, err := s.Pool().Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	var want []string
	for i := range 600 {
		body := `{"id":"s-` + strconv.Itoa(1000+i) + `","merchantId":"m1","source":"checkout","state":"cancelled","storeId":"store-` + strconv.Itoa(i%3) +
			`","merchantReference":"PO-` + strconv.Itoa(i) + `","createdAt":"` + start.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano) +
			`","updatedAt":"` + start.Add(time.Duration(i)*time.Second+time.Hour).Format(time.RFC3339Nano) + `","expiresAt":"` + start.Add(48*time.Hour).Format(time.RFC3339Nano) + `"}`
		if _, err := s.Pool().Exec(ctx, `INSERT INTO sessions (merchant_id, id, created_key, body) VALUES ('m1', $1, $2, $3)`,
			"s-"+strconv.Itoa(1000+i), storage.AppendTimeKey(nil, start.Add(time.Duration(i)*time.Second)), []byte(body)); err != nil {
			t.Fatal(err)
		}
		if i%3 == 1 && i >= 500 && i < 560 {
			want = append([]string{"s-" + strconv.Itoa(1000+i)}, want...)
		}
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO sessions (merchant_id, id, created_key, body) VALUES ('m1', 'broken', $1, 'not json')`,
		storage.AppendTimeKey(nil, start)); err != nil {
		t.Fatal(err)
	}
	s.Close()

	stores := make([]*postgres.Store, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(ctx, dbURL, postgres.Options{}) })
	}
	wg.Wait()
	for i, st := range stores {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		defer st.Close()
	}
	q := session.Query{StoreIDs: []string{"store-1"}, UpdatedFrom: start.Add(500*time.Second + time.Hour), UpdatedTo: start.Add(560*time.Second + time.Hour), Size: 100}
	for i, st := range stores {
		var got []string
		if err := st.View(ctx, func(tx storage.Tx) error {
			page, _, err := tx.ListSessions("m1", q)
			for _, ss := range page {
				got = append(got, ss.ID)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("replica %d: %v, want %v", i, got, want)
		}
	}
	var unfilled int
	if err := stores[0].Pool().QueryRow(ctx, `SELECT count(*) FROM sessions WHERE updated_key IS NULL`).Scan(&unfilled); err != nil || unfilled != 1 {
		t.Fatalf("%d rows unfilled (%v), want only the broken one", unfilled, err)
	}
}

// The replica that sweeps serves only once done (1 000 000 orders: about
// 90 s), so it says so: a line when the sweep begins and one when it ends,
// with how many orders it read and rewrote. It was silent, a start that
// looked hung. A new database's first start, with nothing to sweep, says
// nothing.
func TestReindexIsLogged(t *testing.T) {
	dbURL := freshSchema(t)
	ctx := context.Background()
	var buf bytes.Buffer
	logged := func() []map[string]any {
		var lines []map[string]any
		for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
			var m map[string]any
			if len(l) > 0 && json.Unmarshal(l, &m) == nil && strings.Contains(m["msg"].(string), "statuses") {
				lines = append(lines, m)
			}
		}
		buf.Reset()
		return lines
	}
	opts := postgres.Options{Clock: storagetest.Clock, Logger: slog.New(slog.NewJSONHandler(&buf, nil))}
	s, err := postgres.Open(ctx, dbURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	if l := logged(); len(l) != 0 {
		t.Fatalf("a new database's start logged %v", l)
	}
	f := ordertest.New()
	for range 3 {
		o := f.Order(t)
		o.MerchantID = "m1"
		if err := s.Update(ctx, func(tx storage.Tx) error { return tx.CreateOrder(o) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`UPDATE orders SET statuses = '{uncaptured,onHold}' WHERE id IN (SELECT id FROM orders ORDER BY id LIMIT 2)`,
		`UPDATE store_info SET value = 1 WHERE name = 'statusRules'`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	s, err = postgres.Open(ctx, dbURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := logged()
	if len(l) != 2 || !strings.HasPrefix(l[0]["msg"].(string), "postgres: sweeping") || l[1]["msg"] != "postgres: swept the orders' statuses" {
		t.Fatalf("logged %v, want the sweep's beginning and end", l)
	}
	if l[0]["from"] != float64(1) || l[0]["rules"] != float64(order.StatusRules) {
		t.Errorf("beginning %v: want from 1 to %d", l[0], order.StatusRules)
	}
	if l[1]["read"] != float64(3) || l[1]["updated"] != float64(2) {
		t.Errorf("end %v: want 3 read, 2 updated", l[1])
	}
}
