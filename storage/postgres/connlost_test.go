package postgres_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// cutConnections terminates every backend of application name app, as a
// database restart or a proxy's idle timeout would, and waits until they are gone.
func cutConnections(t *testing.T, app string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var cut int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&cut); err != nil {
		t.Fatal(err)
	}
	if cut == 0 {
		t.Fatal("no connection to cut")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open", left)
		}
	}
}

// cutOnFirstAttempt runs an Update that reads the merchant, then, on its
// first attempt only, cuts the store's connections (application name app)
// before calling then; the Update must succeed on its second attempt.
func cutOnFirstAttempt(t *testing.T, s storage.Store, app, merchantID, what string, then func(tx storage.Tx, m *storage.Merchant, first bool) error) {
	t.Helper()
	attempts := 0
	err := s.Update(context.Background(), func(tx storage.Tx) error {
		attempts++
		m, err := tx.GetMerchant(merchantID)
		if err != nil {
			return err
		}
		if attempts == 1 {
			cutConnections(t, app)
		}
		return then(tx, m, attempts == 1)
	})
	if err != nil || attempts != 2 {
		t.Fatalf("%s: %v after %d attempts", what, err, attempts)
	}
}

// TestConnectionsCutBeforeCommitRunAgain: pooled connections the server
// closed while they sat idle fail on their next use, and a connection cut
// in the middle of a transaction fails its next statement. Neither sent a
// COMMIT, so nothing was written, and the transaction runs again on a fresh
// connection instead of failing the request (a 500 through HTTP).
func TestConnectionsCutBeforeCommitRunAgain(t *testing.T) {
	app := "kassa_cut_" + rand.Text()[:8]
	u := freshSchema(t) + "&application_name=" + app
	ctx := context.Background()
	s := openNow(t, u)
	l, merchantID, orderID := ledgerWithOrder(t, s)

	cutConnections(t, app)
	if _, err := l.Capture(ctx, kassa.Call{MerchantID: merchantID, IdempotencyKey: "k"}, orderID, &capture.FullRequest{}); err != nil {
		t.Fatalf("capture on a pool of cut connections: %v", err)
	}
	cutConnections(t, app)
	wantCapturedOnce(t, l, merchantID, orderID)

	// Cut in the middle: the first attempt reads, loses its connection, and
	// fails its next read; the second attempt writes the merchant once.
	cutOnFirstAttempt(t, s, app, merchantID, "update cut in the middle", func(tx storage.Tx, m *storage.Merchant, first bool) error {
		if first {
			if _, err := tx.GetMerchant(merchantID); err == nil {
				return errors.New("a read on a cut connection succeeded")
			} else {
				return err
			}
		}
		m.Name = "renamed"
		return tx.PutMerchant(m)
	})
	var name string
	if err := s.View(ctx, func(tx storage.Tx) error {
		m, err := tx.GetMerchant(merchantID)
		if err == nil {
			name = m.Name
		}
		return err
	}); err != nil || name != "renamed" {
		t.Fatalf("merchant after the update: %q, %v", name, err)
	}
}

// TestOpenOnAPortThatDoesNotAnswer: a URL naming a port where something
// other than PostgreSQL accepts connections but never answers fails by the
// store's own connect timeout, not by waiting out the caller's deadline.
func TestOpenOnAPortThatDoesNotAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent, until the test ends
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := postgres.Open(ctx, "postgres://kassa@"+ln.Addr().String()+"/kassa?sslmode=disable", postgres.Options{})
	if err == nil {
		s.Close()
		t.Fatal("opened a store on a port that never answers")
	}
	if ctx.Err() != nil {
		t.Fatalf("waited out the caller's deadline: %v", err)
	}
}

// TestConnectionCutJustBeforeCommitRunsAgain: the connection is cut after
// the function's last read, so the server's termination notice is the
// answer to the first statement of the commit's round trip (a held write,
// or its prepare). Everything after it in that round trip, COMMIT
// included, never ran: the transaction runs again and writes once.
func TestConnectionCutJustBeforeCommitRunsAgain(t *testing.T) {
	for _, held := range []string{"task", "merchant"} {
		app := "kassa_cut_" + rand.Text()[:8]
		ctx := context.Background()
		s := openNow(t, freshSchema(t)+"&application_name="+app)
		l := kassa.New(s, kassa.Options{})
		creds, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m"})
		if err != nil {
			t.Fatal(err)
		}
		cutOnFirstAttempt(t, s, app, creds.MerchantID, held, func(tx storage.Tx, m *storage.Merchant, _ bool) error {
			if held == "task" {
				return tx.ScheduleTask(&storage.Task{ID: "task-1", Kind: "autoCapture", MerchantID: m.ID, OrderID: "o", DueAt: time.Now().Add(time.Hour)})
			}
			m.Name = "renamed"
			return tx.PutMerchant(m)
		})
	}
}

// TestConnectionCutBeforeALoneCommitRunsAgain: a transaction whose
// commit's round trip holds no write sends COMMIT alone, and on a
// connection that has not run kassa's COMMIT before, pgx first prepares it
// in a round trip of its own. A connection cut before that answers the
// prepare, not COMMIT, which was never sent: the transaction runs again,
// rather than failing as a commit of unknown outcome (a 500 through HTTP).
func TestConnectionCutBeforeALoneCommitRunsAgain(t *testing.T) {
	app := "kassa_cut_" + rand.Text()[:8]
	u := freshSchema(t)
	ctx := context.Background()
	// The merchant is made through another pool, so that the store under
	// test has never sent COMMIT on any of its connections.
	creds, _, err := kassa.New(openNow(t, u), kassa.Options{}).EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	s := openNow(t, u+"&application_name="+app)
	cutOnFirstAttempt(t, s, app, creds.MerchantID, "read only", func(storage.Tx, *storage.Merchant, bool) error { return nil })
}

// proxy forwards TCP connections to the test database, and can be cut off
// and brought back on the same address, as a database restart looks to kassa.
type proxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
	// cutReply, when set (before up), reads the server's side as protocol
	// messages (the URL must say sslmode=disable) and cuts the connection
	// at the first message it returns true for, which the client never gets.
	cutReply func(typ byte, body []byte) bool
	// quiet has a flag per connection forwarded: once set (silence), what
	// either side sends is read and dropped, and the connection stays open.
	quiet []*atomic.Bool
}

// proxiedStore opens a store on a fresh schema through a new proxy, with
// params appended to the schema's URL.
func proxiedStore(t *testing.T, params string) (*proxy, *postgres.Store) {
	t.Helper()
	p := newProxy(t)
	u, err := url.Parse(freshSchema(t) + params)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.addr
	return p, openNow(t, u.String())
}

func newProxy(t *testing.T) *proxy {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, target: u.Host}
	p.up("127.0.0.1:0")
	t.Cleanup(p.down)
	return p
}

func (p *proxy) up(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Error(err)
		return
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			quiet := new(atomic.Bool)
			p.mu.Lock()
			p.conns = append(p.conns, c, d)
			p.quiet = append(p.quiet, quiet)
			p.mu.Unlock()
			go func() { forward(d, c, quiet); d.Close() }()
			if p.cutReply == nil {
				go func() { forward(c, d, quiet); c.Close() }()
			} else {
				go p.relay(c, d)
			}
		}
	}()
}

// relay forwards the server's messages one by one until cutReply picks one.
func (p *proxy) relay(client, server net.Conn) {
	defer client.Close()
	defer server.Close()
	r := bufio.NewReader(server)
	for {
		msg := make([]byte, 5)
		if _, err := io.ReadFull(r, msg); err != nil {
			return
		}
		msg = append(msg, make([]byte, int(binary.BigEndian.Uint32(msg[1:]))-4)...)
		if _, err := io.ReadFull(r, msg[5:]); err != nil {
			return
		}
		if p.cutReply(msg[0], msg[5:]) {
			return
		}
		if _, err := client.Write(msg); err != nil {
			return
		}
	}
}

// forward copies src to dst until either fails, dropping what src sends
// once quiet is set.
func forward(dst, src net.Conn, quiet *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !quiet.Load() {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// silence makes the connections open now go silent, as a failover that
// moved the database's address, or a NAT or balancer that dropped their
// flows, leaves them: nothing either side sends arrives, and nothing tells
// either side so (no reset, no close). New connections go through.
func (p *proxy) silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, q := range p.quiet {
		q.Store(true)
	}
}

// down refuses new connections and cuts the open ones.
func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns, p.quiet = nil, nil
}

// TestDatabaseRestartAndOutage: a database that is gone for a moment (a
// fast restart) costs a transaction a retry, not an error; one that stays
// gone is answered, after a short while, as unavailable (503 through HTTP),
// not as an internal error.
func TestDatabaseRestartAndOutage(t *testing.T) {
	p, s := proxiedStore(t, "")
	put := func(name string) error {
		return s.Update(context.Background(), func(tx storage.Tx) error {
			return tx.PutMerchant(&storage.Merchant{ID: "m1", ClientID: "c1", Name: name})
		})
	}
	if err := put("before"); err != nil {
		t.Fatal(err)
	}

	p.down()
	time.AfterFunc(time.Second, func() { p.up(p.addr) })
	if err := put("across a restart"); err != nil {
		t.Fatalf("update across a restart: %v", err)
	}

	p.down()
	err := put("during an outage")
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Kind != fault.Unavailable || fe.Code != "store_unavailable" {
		t.Fatalf("update during an outage: %v", err)
	}
}

// TestReadCutAtCommitStands: a View wrote nothing, so a COMMIT that drew
// a termination notice, or no answer at all (a database stopped with -m
// immediate, a proxy that dropped the connection), hides no outcome: what
// the View read in its snapshot stands, and its function is not run again
// (a GET answered 500 while the database restarted; a list run twice would
// have appended its page twice).
func TestReadCutAtCommitStands(t *testing.T) {
	app := "kassa_cut_" + rand.Text()[:8]
	p, s := proxiedStore(t, "&application_name="+app)
	putMerchantM1(t, s)
	for _, cut := range []string{"terminated", "dropped"} {
		attempts, name := 0, ""
		err := s.View(context.Background(), func(tx storage.Tx) error {
			attempts++
			m, err := tx.GetMerchant("m1")
			if err != nil {
				return err
			}
			name = m.Name
			if cut == "terminated" {
				cutConnections(t, app)
			} else {
				p.down()
				p.up(p.addr)
			}
			return nil
		})
		if err != nil || attempts != 1 || name != "m" {
			t.Fatalf("read %s at its commit: %v after %d attempts, read %q", cut, err, attempts, name)
		}
	}
	if err := s.View(context.Background(), func(tx storage.Tx) error {
		_, err := tx.GetMerchant("m1")
		return err
	}); err != nil {
		t.Fatalf("read after the cuts: %v", err)
	}
}

// TestConnectionCutWhileIdleBeforeCommitRunsAgain: a transaction whose last
// statement went on its own (a merchant update) is terminated while it waits
// for the client (idle in transaction, where most of a transaction's time is
// spent): the server's termination notice is already on its way when COMMIT
// is sent, so it arrives as the answer to the commit's round trip although
// COMMIT never ran. Nothing was written, and the transaction runs again
// instead of failing with an unknown outcome (a 500 through HTTP).
func TestConnectionCutWhileIdleBeforeCommitRunsAgain(t *testing.T) {
	app := "kassa_cut_" + rand.Text()[:8]
	s := openNow(t, freshSchema(t)+"&application_name="+app)
	putMerchantM1(t, s)
	attempts, err := appendToName(s, func(attempt int) {
		if attempt == 1 {
			cutConnections(t, app)
		}
	})
	if err != nil || attempts != 2 {
		t.Fatalf("update cut while idle before its commit: %v after %d attempts", err, attempts)
	}
	wantChangedOnce(t, s)
}

// cutAtCommitAnswer is a store behind a proxy that, once armed, cuts the
// connection where the server answers COMMIT (CommandComplete COMMIT, or an
// error), so that the server has ended the transaction but the client never
// learns how; and with down, refuses connections from then on.
func cutAtCommitAnswer(t *testing.T, down bool, onCut func()) (s *postgres.Store, u string, arm *atomic.Bool, p *proxy) {
	t.Helper()
	arm = new(atomic.Bool)
	target, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	p = &proxy{t: t, target: target.Host, cutReply: func(typ byte, body []byte) bool {
		answer := typ == 'C' && string(body) == "COMMIT\x00" || typ == 'E'
		if !answer || !arm.CompareAndSwap(true, false) {
			return false
		}
		if onCut != nil {
			onCut()
		}
		if down {
			p.down() // before the client sees the cut, so settle finds the database gone
		}
		return true
	}}
	p.up("127.0.0.1:0")
	t.Cleanup(p.down)
	u = freshSchema(t)
	via, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	via.Host = p.addr
	q := via.Query()
	q.Set("sslmode", "disable")
	via.RawQuery = q.Encode()
	return openNow(t, via.String()), u, arm, p
}

// appendToName adds "+" to merchant m1's name, calling onAttempt with the
// number of each attempt after its write, and returns the number of
// attempts and the Update's error.
func appendToName(s storage.Store, onAttempt func(attempt int)) (int, error) {
	attempts := 0
	err := s.Update(context.Background(), func(tx storage.Tx) error {
		attempts++
		m, err := tx.GetMerchant("m1")
		if err != nil {
			return err
		}
		m.Name += "+"
		if err := tx.PutMerchant(m); err != nil {
			return err
		}
		onAttempt(attempts)
		return nil
	})
	return attempts, err
}

// armOnFirst arms arm on an update's first attempt only (appendToName).
func armOnFirst(arm *atomic.Bool) func(int) { return func(attempt int) { arm.Store(attempt == 1) } }

// ledgerWithOrder is a ledger on s with a merchant and an uncaptured order
// of one line of 100.00 (oneLineOrder).
func ledgerWithOrder(t *testing.T, s storage.Store) (l *kassa.Ledger, merchantID, orderID string) {
	t.Helper()
	ctx := context.Background()
	l = kassa.New(s, kassa.Options{})
	creds, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	authorize(t, l, creds.MerchantID, "t")
	res, err := l.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: creds.MerchantID}, "t", oneLineOrder())
	if err != nil {
		t.Fatal(err)
	}
	return l, creds.MerchantID, res.Order.ID
}

// wantCapturedOnce fails t unless the order of ledgerWithOrder reads as
// captured in full by one capture.
func wantCapturedOnce(t *testing.T, l *kassa.Ledger, merchantID, orderID string) {
	t.Helper()
	got, _, err := l.GetOrder(context.Background(), merchantID, orderID)
	if err != nil {
		t.Fatalf("read the order: %v", err)
	}
	if a := got.Amounts(); len(got.Captured) != 1 || a.Captured != 10000 || a.Uncaptured != 0 {
		t.Fatalf("after the capture: %d captures, captured %d, uncaptured %d", len(got.Captured), a.Captured, a.Uncaptured)
	}
}

// putMerchantM1 stores merchant m1, named "m", for appendToName.
func putMerchantM1(t *testing.T, s storage.Store) {
	t.Helper()
	if err := s.Update(context.Background(), func(tx storage.Tx) error {
		return tx.PutMerchant(&storage.Merchant{ID: "m1", ClientID: "c1", Name: "m"})
	}); err != nil {
		t.Fatal(err)
	}
}

// wantChangedOnce fails t unless appendToName's change is in m1 once.
func wantChangedOnce(t *testing.T, s storage.Store) {
	t.Helper()
	if name := merchantName(t, s); name != "m+" {
		t.Fatalf("merchant after the update: %q, want it changed once", name)
	}
}

func merchantName(t *testing.T, s storage.Store) string {
	t.Helper()
	var name string
	if err := s.View(context.Background(), func(tx storage.Tx) error {
		m, err := tx.GetMerchant("m1")
		if err == nil {
			name = m.Name
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestCommitAnswerLostAfterItCommitted: the server commits, then the
// connection breaks before COMMIT's answer reaches kassa. The server is
// asked, on another connection, what became of the transaction: it
// committed, so the Update succeeds, once, as if COMMIT had answered,
// instead of failing with an unknown outcome (a 500 that leaves a merchant
// not knowing whether a capture happened).
func TestCommitAnswerLostAfterItCommitted(t *testing.T) {
	s, _, arm, _ := cutAtCommitAnswer(t, false, nil)
	putMerchantM1(t, s)
	attempts, err := appendToName(s, armOnFirst(arm))
	if err != nil || attempts != 1 {
		t.Fatalf("update whose COMMIT answer was lost: %v after %d attempts", err, attempts)
	}
	if arm.Load() {
		t.Fatal("the proxy never cut the connection")
	}
	wantChangedOnce(t, s)

	// The same through the ledger: a capture whose COMMIT answer was lost
	// is answered as captured, and applied once.
	l, merchantID, orderID := ledgerWithOrder(t, s)
	arm.Store(true)
	if _, err := l.Capture(context.Background(), kassa.Call{MerchantID: merchantID, IdempotencyKey: "k"}, orderID, &capture.FullRequest{}); err != nil {
		t.Fatalf("capture whose COMMIT answer was lost: %v", err)
	}
	if arm.Load() {
		t.Fatal("the proxy never cut the capture's connection")
	}
	wantCapturedOnce(t, l, merchantID, orderID)
}

// TestCommitAnswerLostAfterItFailed: COMMIT fails on the server (here a
// deferred constraint trigger refuses it once), and the connection breaks
// before its answer arrives. Asked, the server says the transaction
// aborted: nothing was written, so it runs again, and writes once.
func TestCommitAnswerLostAfterItFailed(t *testing.T) {
	s, u, arm, _ := cutAtCommitAnswer(t, false, nil)
	putMerchantM1(t, s)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SEQUENCE refusals;
		CREATE FUNCTION refuse_once() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('refusals') = 1 THEN RAISE EXCEPTION 'refused once'; END IF;
			RETURN NULL;
		END $$;
		CREATE CONSTRAINT TRIGGER refuse_once AFTER UPDATE ON merchants
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_once()`); err != nil {
		t.Fatal(err)
	}
	attempts, err := appendToName(s, armOnFirst(arm))
	if err != nil || attempts != 2 {
		t.Fatalf("update whose failed COMMIT's answer was lost: %v after %d attempts, want success on the second", err, attempts)
	}
	if arm.Load() {
		t.Fatal("the proxy never cut the connection")
	}
	wantChangedOnce(t, s)
}

// TestCommitAnswerLostAndServerGone: COMMIT's answer is lost and the
// database cannot be reached to ask what became of the transaction. The
// outcome stays unknown, and the error says so: the function is not run
// again (it committed).
func TestCommitAnswerLostAndServerGone(t *testing.T) {
	s, _, arm, p := cutAtCommitAnswer(t, true, nil)
	putMerchantM1(t, s)
	attempts, err := appendToName(s, armOnFirst(arm))
	if fault.KindOf(err) != fault.Internal || fault.CodeOf(err) != fault.CodeOutcomeUnknown || !strings.Contains(err.Error(), "unknown") || attempts != 1 {
		t.Fatalf("update whose COMMIT answer was lost, with the database gone: %v after %d attempts, want an unknown outcome after one", err, attempts)
	}
	p.up(p.addr)
	wantChangedOnce(t, s)
}

// TestCommitAnswerLostAcrossAnotherServerLife: between COMMIT and the
// question, the server's statistics were reset, as crash recovery does
// (which keeps pg_postmaster_start_time, and may hand out an id again
// whose log was lost). The id may then name another transaction, so the
// outcome stays unknown rather than being read off it.
func TestCommitAnswerLostAcrossAnotherServerLife(t *testing.T) {
	var u string // set before arm is, which the proxy reads first
	s, u, arm, _ := cutAtCommitAnswer(t, false, func() {
		conn, err := pgx.Connect(context.Background(), u)
		if err == nil {
			_, err = conn.Exec(context.Background(), `select pg_stat_reset_shared('bgwriter')`)
			conn.Close(context.Background())
		}
		if err != nil {
			t.Error(err)
		}
	})
	putMerchantM1(t, s)
	attempts, err := appendToName(s, armOnFirst(arm))
	if err == nil || fault.KindOf(err) != fault.Internal || fault.CodeOf(err) != fault.CodeOutcomeUnknown || !strings.Contains(err.Error(), "unknown") || attempts != 1 {
		t.Fatalf("update whose COMMIT answer was lost, asked in another server life: %v after %d attempts, want an unknown outcome after one", err, attempts)
	}
	wantChangedOnce(t, s)
}

// TestOutageWithinTheCallersDeadline: a caller whose deadline is no longer
// than the store's reconnect window (/readyz gives 2 s) is told that the
// database cannot be reached, not that the store did not answer in time: it
// was refused at every attempt, and its deadline only ended the retries.
//
// That the deadline, not the store's own window, ends them is told by
// causality rather than by the clock: the database comes back as soon as the
// deadline has passed, so a store that went on retrying finds it there and
// answers with what it read (the merchant is not found), while one that
// stopped at the deadline answers the outage.
func TestOutageWithinTheCallersDeadline(t *testing.T) {
	p, s := proxiedStore(t, "")
	for _, deadline := range []time.Duration{300 * time.Millisecond, 2 * time.Second} {
		p.down()
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		done := make(chan error, 1)
		go func() {
			done <- s.View(ctx, func(tx storage.Tx) error {
				_, err := tx.GetMerchant("readyz")
				return err
			})
		}()
		<-ctx.Done()
		p.up(p.addr)
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second): // a hang, not a slow machine
			t.Fatalf("deadline %v: no answer 30 s after it", deadline)
		}
		cancel()
		var fe *fault.Error
		if !errors.As(err, &fe) || fe.Code != "store_unavailable" || !strings.Contains(fe.Message, "cannot be reached") {
			t.Errorf("deadline %v: %v, want the database cannot be reached", deadline, err)
		}
	}
}
