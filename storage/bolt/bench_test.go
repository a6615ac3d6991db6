package bolt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
)

// Durable commits per second, side by side (run them in one go test
// invocation; see docs/benchmarks.md):
//
//	store/1writer      Store.Update creating one order, one writer
//	store/16writers    the same, 16 concurrent writers (group commit)
//	bbolt-batch/16     bbolt DB.Batch putting the same order JSON, 16 writers
//	bbolt-update/1     bbolt DB.Update putting the same order JSON, one writer
//
// Every variant fsyncs each commit.
func BenchmarkCommit(b *testing.B) {
	proto := benchOrder(b)
	raw, err := json.Marshal(proto)
	if err != nil {
		b.Fatal(err)
	}
	store := func(writers int) func(b *testing.B) {
		return func(b *testing.B) {
			s, err := bolt.Open(filepath.Join(b.TempDir(), "kassa.db"), bolt.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			var n atomic.Int64
			b.ResetTimer()
			parallel(writers, b.N, func(int) {
				o := proto.Clone()
				o.ID = fmt.Sprint("order-", n.Add(1))
				if err := s.Update(ctx, func(tx storage.Tx) error { return tx.CreateOrder(o) }); err != nil {
					b.Error(err)
				}
			})
			report(b)
			calls, commits := bolt.Stats(s)
			b.ReportMetric(float64(calls)/float64(max(commits, 1)), "orders/commit")
		}
	}
	raw16 := func(batch bool, writers int) func(b *testing.B) {
		return func(b *testing.B) {
			db, err := bbolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			bucket := []byte("orders")
			db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket(bucket); return err })
			var n atomic.Int64
			b.ResetTimer()
			parallel(writers, b.N, func(int) {
				k := []byte(fmt.Sprint("order-", n.Add(1)))
				put := func(tx *bbolt.Tx) error { return tx.Bucket(bucket).Put(k, raw) }
				var err error
				if batch {
					err = db.Batch(put)
				} else {
					err = db.Update(put)
				}
				if err != nil {
					b.Error(err)
				}
			})
			report(b)
		}
	}
	b.Run("store/1writer", store(1))
	b.Run("store/16writers", store(16))
	b.Run("bbolt-batch/16writers", raw16(true, 16))
	b.Run("bbolt-update/1writer", raw16(false, 1))
}

// parallel runs n calls of fn on writers goroutines.
func parallel(writers, n int, fn func(int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				fn(int(i))
			}
		}()
	}
	wg.Wait()
}

func report(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// benchOrder is a realistic order: five lines, one partial capture.
func benchOrder(tb testing.TB) *order.Order {
	ids := &counterIDs{}
	e := order.Env{Now: time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC), IDs: ids, Docs: &seqDocs{}, Policy: order.DefaultPolicy()}
	o := newOrder(tb, "m1", 5, e)
	if _, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{{ID: ptr(o.Uncaptured.Lines[0].ID)}},
		TotalCaptureAmount: ptr(int64(1000))}, e); err != nil {
		tb.Fatal(err)
	}
	return o
}

var (
	listOnce sync.Once
	listPath string
)

// listDataset builds, once per process, a file of 100 000 orders of one
// merchant (plus 10 000 of another) over 20 stores, five payment methods and
// every shape of benchOrders, loaded with NoSync for speed.
func listDataset(b *testing.B) string {
	listOnce.Do(func() {
		dir, err := mkdirTemp()
		if err != nil {
			b.Fatal(err)
		}
		listPath = filepath.Join(dir, "list.db")
		start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		var clock atomic.Int64
		s, err := bolt.Open(listPath, bolt.Options{NoSync: true, Clock: func() time.Time {
			return start.Add(time.Duration(clock.Load()) * time.Second)
		}})
		if err != nil {
			b.Fatal(err)
		}
		ids := &counterIDs{}
		methods := []order.PaymentMethod{
			{Provider: order.ProviderService, Type: order.PayInvoice}, {Provider: order.ProviderService, Type: order.PayCard},
			{Provider: order.ProviderExternal, Type: order.PayInvoice}, {Provider: order.ProviderService, Type: order.PayBankTransfer},
		}
		const perTx = 2000
		for base := 0; base < 110_000; base += perTx {
			clock.Store(int64(base) * 60)
			err := s.Update(context.Background(), func(tx storage.Tx) error {
				for i := base; i < base+perTx; i++ {
					m := "m1"
					if i%11 == 10 {
						m = "m2"
					}
					e := env(tx, m, ids)
					e.Now = start.Add(time.Duration(i) * time.Minute)
					req := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
						StoreID: fmt.Sprint("store-", i%20), Reference: fmt.Sprint("ref-", i),
						OrderLines: []order.LineInput{line("a", 1, 1000, 2500), line("b", 2, 500, 2500)}}
					lines, mode, err := order.ValidateCreate(req, false, ids)
					if err != nil {
						return err
					}
					auth := order.Authorization{TokenID: "tok", Country: "SE", Currency: "SEK",
						Buyer: order.Customer{CompanyID: "5560000001", Country: "SE"}, PaymentMethod: methods[i%len(methods)]}
					o, err := order.Create(m, req, lines, mode, auth, e)
					if err != nil {
						return err
					}
					switch i % 7 {
					case 1, 2, 3:
						_, err = capture.Full(o, nil, e)
					case 4:
						err = o.Cancel(e)
					}
					if err != nil {
						return err
					}
					if err := tx.CreateOrder(o); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	})
	return listPath
}

// BenchmarkListFirstPage measures the first page (size 100) of filtered lists
// over 100 000 orders of one merchant, on a file reopened with the durable
// defaults.
func BenchmarkListFirstPage(b *testing.B) {
	path := listDataset(b)
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	queries := []struct {
		name string
		q    storage.OrderQuery
	}{
		{"storeId+status", storage.OrderQuery{StoreIDs: []string{"store-3"}, Status: []order.Status{order.StatusFullyCaptured}}},
		{"none", storage.OrderQuery{}},
		{"statusNot", storage.OrderQuery{StatusNot: []order.Status{order.StatusCancelled}}},
		{"status+category", storage.OrderQuery{Status: []order.Status{order.StatusUncaptured}, Categories: []order.Category{order.CategoryDirectBank}}},
		{"storeId+statusAnd+created", storage.OrderQuery{StoreIDs: []string{"store-7", "store-8"},
			StatusAnd:   []order.Status{order.StatusUncaptured, order.StatusReadyForCapture},
			CreatedFrom: time.Date(2025, 1, 20, 0, 0, 0, 0, time.UTC), CreatedTo: time.Date(2025, 2, 20, 0, 0, 0, 0, time.UTC)}},
		{"expiresRange", storage.OrderQuery{ExpiresFrom: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), ExpiresTo: time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC)}},
		{"q", storage.OrderQuery{Q: "ref-50001"}},
	}
	ctx := context.Background()
	for _, c := range queries {
		b.Run(c.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				if err := s.View(ctx, func(tx storage.Tx) error {
					page, err := tx.ListOrders("m1", c.q)
					n = len(page.Orders)
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
			if n == 0 {
				b.Fatalf("%s: empty page", c.name)
			}
			b.ReportMetric(float64(n), "orders/page")
		})
	}
}

// BenchmarkSettlementTransactionsWalk pages through all 8 000 transactions
// of one settlement, 100 at a time, each page after the last one's id (GET
// /v1/settlements/{id}/tx?fromId=…). An op is the whole walk.
func BenchmarkSettlementTransactionsWalk(b *testing.B) {
	s, err := bolt.Open(filepath.Join(b.TempDir(), "kassa.db"), bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 8000
	batch := settlement.Batch{Settlement: settlement.Settlement{ID: "s1", Reference: "S-000001", MerchantID: "m1",
		Currency: "SEK", CreatedAt: time.Now()}}
	for i := range n {
		batch.Transactions = append(batch.Transactions, settlement.Transaction{ID: fmt.Sprintf("settlementTx-%06d", i),
			SettlementID: "s1", Seq: i + 1, Type: settlement.KindCapture, OrderID: fmt.Sprintf("order-%06d", i),
			LedgerID: fmt.Sprintf("ledger-%06d", i), DocumentReference: fmt.Sprint(100000 + i), Amount: 12500, Currency: "SEK",
			OccurredAt: time.Now()})
	}
	ctx := context.Background()
	if err := s.Update(ctx, func(tx storage.Tx) error { return tx.SaveSettlement(batch) }); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		seen, from := 0, ""
		for {
			var page []settlement.Transaction
			var next string
			err := s.View(ctx, func(tx storage.Tx) error {
				var err error
				page, next, err = tx.SettlementTransactions("m1", "s1", from, 100)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			seen += len(page)
			if next == "" {
				break
			}
			from = next
		}
		if seen != n {
			b.Fatalf("walked %d transactions, want %d", seen, n)
		}
	}
}

// BenchmarkListBigOrders lists the first page (size 24) of 24 orders of 5 000
// lines (about 2 MB of JSON each), with no decoded-order cache: what a page
// costs a server when a merchant keeps big orders. The page's byte budget
// (storage.MaxPageBytes) bounds it; B/op is the memory a list takes.
func BenchmarkListBigOrders(b *testing.B) {
	s, err := bolt.Open(filepath.Join(b.TempDir(), "kassa.db"), bolt.Options{NoSync: true, DecodedOrderBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	e := order.Env{Now: time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC), IDs: &counterIDs{}, Docs: &seqDocs{}, Policy: order.DefaultPolicy()}
	proto := newOrder(b, "m1", 1000, e)
	desc := fmt.Sprintf("%0200d", 0)
	var lines []order.Line
	for i := range 5000 {
		l := proto.Uncaptured.Lines[i%1000]
		l.ID, l.Description = fmt.Sprintf("line-%05d", i), fmt.Sprint(desc, i)
		lines = append(lines, l)
	}
	proto.Uncaptured.Lines = lines
	const n = 24
	ctx := context.Background()
	for i := range n {
		o := proto.Clone()
		o.ID = fmt.Sprintf("big-%02d", i)
		o.CreatedAt = o.CreatedAt.Add(time.Duration(i) * time.Second)
		if err := s.Update(ctx, func(tx storage.Tx) error { return tx.CreateOrder(o) }); err != nil {
			b.Fatal(err)
		}
	}
	js, _ := json.Marshal(proto)
	var got int
	b.ResetTimer()
	for b.Loop() {
		if err := s.View(ctx, func(tx storage.Tx) error {
			page, err := tx.ListOrders("m1", storage.OrderQuery{Size: n})
			got = len(page.Orders)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(got), "orders/page")
	b.ReportMetric(float64(len(js))/(1<<20), "MB/order")
}
