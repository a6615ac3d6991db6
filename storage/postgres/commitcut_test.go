package postgres_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
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
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// cut is where a cutter breaks the round trip it was armed for: what of it
// reaches the server, and what of the server's answer reaches the client.
type cut int

const (
	// dropTrip: the round trip never reaches the server; both sides are
	// closed.
	dropTrip cut = iota
	// closeBoth: the round trip is passed on, then both sides are closed at
	// once, so the server may or may not get as far as COMMIT.
	closeBoth
	// noAnswer: the round trip is passed on and the client's side closed;
	// the server's answer, up to its ReadyForQuery, is read and dropped, so
	// the server ran all of it.
	noAnswer
	// halfFirst: the first half of the first answer message is passed on.
	halfFirst
	// atCommit: the answers before CommandComplete COMMIT are passed on,
	// then the connection is cut.
	atCommit
	// halfCommit: as atCommit, with the first half of CommandComplete
	// COMMIT passed on.
	halfCommit
	// afterReady: the whole answer is passed on, ReadyForQuery included,
	// then the connection is cut.
	afterReady
	// poolerFirst: a pooler that lost its server, after it passed the round
	// trip on: the client's first answer is a FATAL of the pooler's own
	// (08P01, as PgBouncer's "server conn crashed?"), while the server runs
	// all of it.
	poolerFirst
	// poolerAtCommit: as poolerFirst, the answers before CommandComplete
	// COMMIT passed on and the FATAL in its place.
	poolerAtCommit
)

var cutNames = map[cut]string{dropTrip: "dropTrip", closeBoth: "closeBoth", noAnswer: "noAnswer", halfFirst: "halfFirst",
	atCommit: "atCommit", halfCommit: "halfCommit", afterReady: "afterReady", poolerFirst: "poolerFirst", poolerAtCommit: "poolerAtCommit"}

func (c cut) String() string { return cutNames[c] }

// cutter is a TCP proxy to the test database that reads both directions as
// protocol messages (the URL must say sslmode=disable). Once armed with a
// cut, the next round trip any client sends that runs a statement (a Query,
// or messages up to a Sync with an Execute among them: not a round trip
// that only prepares) is broken there.
type cutter struct {
	t      *testing.T
	target string
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	armed  atomic.Int32 // a cut plus one; 0: none
	fired  atomic.Bool
	refuse atomic.Bool // refuse new connections once fired
	// commitText: only a round trip whose text holds the statement commit
	// is cut (the exec and simple_protocol modes send it as text in every
	// round trip; the others name a prepared statement).
	commitText atomic.Bool
	// localized: the pooler's FATAL says its severity in Swedish
	// ("FATALT"), as a server whose lc_messages is Swedish says its own,
	// with the unlocalized one beside it.
	localized atomic.Bool
}

func newCutter(t *testing.T) *cutter {
	t.Helper()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutter{t: t, target: u.Host, ln: ln}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// via is u sent through p.
func (p *cutter) via(u string) string {
	v, err := url.Parse(u)
	if err != nil {
		p.t.Fatal(err)
	}
	v.Host = p.ln.Addr().String()
	q := v.Query()
	q.Set("sslmode", "disable")
	v.RawQuery = q.Encode()
	return v.String()
}

func (p *cutter) arm(c cut) { p.armed.Store(int32(c) + 1) }

func (p *cutter) disarm() (fired bool) {
	p.armed.Store(0)
	return p.fired.Load()
}

func (p *cutter) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *cutter) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() && p.fired.Load() {
			c.Close()
			continue
		}
		d, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, d)
		p.mu.Unlock()
		l := &cutLink{p: p, client: c, server: d}
		go l.fromClient()
		go l.fromServer()
	}
}

// cutLink is one connection through a cutter.
type cutLink struct {
	p      *cutter
	client net.Conn
	server net.Conn
	// plan is the cut (plus one) of the round trip under way, set before
	// it is passed on.
	plan atomic.Int32
}

func readMsg(r *bufio.Reader, typed bool) ([]byte, error) {
	head := 5
	if !typed {
		head = 4
	}
	msg := make([]byte, head)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(msg[head-4:])) - 4
	msg = append(msg, make([]byte, n)...)
	if _, err := io.ReadFull(r, msg[head:]); err != nil {
		return nil, err
	}
	return msg, nil
}

func (l *cutLink) fromClient() {
	// noAnswer leaves the server's side to fromServer, which reads the
	// answer to its end first: closed here, right after the round trip
	// was written, the server could find its client gone before it ran
	// COMMIT, and the cut would not be the lost answer it is named for.
	keepServer := false
	defer func() {
		if !keepServer {
			l.server.Close()
		}
	}()
	r := bufio.NewReader(l.client)
	startup, err := readMsg(r, false)
	if err != nil {
		return
	}
	if _, err := l.server.Write(startup); err != nil {
		return
	}
	var trip []byte
	runs := false
	for {
		msg, err := readMsg(r, true)
		if err != nil {
			return
		}
		trip = append(trip, msg...)
		switch msg[0] {
		case 'E', 'Q':
			runs = true
		}
		switch msg[0] {
		case 'S', 'Q', 'H', 'X', 'd', 'c', 'f':
		default:
			continue // more of the round trip to come
		}
		commit := !l.p.commitText.Load() || bytes.Contains(trip, []byte("commit\x00"))
		if armed := l.p.armed.Load(); runs && commit && armed != 0 && l.p.fired.CompareAndSwap(false, true) {
			l.plan.Store(armed)
			switch cut(armed - 1) {
			case dropTrip:
				l.client.Close()
				return
			case closeBoth:
				l.server.Write(trip)
				l.client.Close()
				return
			case noAnswer:
				l.server.Write(trip)
				l.client.Close()
				keepServer = true
				return
			}
		}
		if _, err := l.server.Write(trip); err != nil {
			return
		}
		trip, runs = nil, false
	}
}

// poolerFatal is the FATAL a pooler sends for a server connection it lost.
func poolerFatal(localized bool) []byte {
	body := []byte("SFATAL\x00VFATAL\x00C08P01\x00Mserver conn crashed?\x00\x00")
	if localized {
		body = []byte("SFATALT\x00VFATAL\x00C08P01\x00Mserver conn crashed?\x00\x00")
	}
	msg := []byte{'E', 0, 0, 0, 0}
	binary.BigEndian.PutUint32(msg[1:], uint32(len(body)+4))
	return append(msg, body...)
}

func (l *cutLink) fromServer() {
	defer l.client.Close()
	defer l.server.Close()
	r := bufio.NewReader(l.server)
	first := true
	for {
		msg, err := readMsg(r, true)
		if err != nil {
			return
		}
		plan := l.plan.Load()
		if plan == 0 {
			if _, err := l.client.Write(msg); err != nil {
				return
			}
			continue
		}
		isCommit := msg[0] == 'C' && string(msg[5:]) == "COMMIT\x00"
		drain := func() {
			l.client.Close()
			for msg[0] != 'Z' {
				if msg, err = readMsg(r, true); err != nil {
					return
				}
			}
		}
		switch c := cut(plan - 1); {
		case c == noAnswer:
			drain()
			return
		case c == halfFirst && first, c == halfCommit && isCommit:
			l.client.Write(msg[:len(msg)/2])
			return
		case c == atCommit && isCommit:
			return
		case c == poolerFirst && first, c == poolerAtCommit && isCommit:
			l.client.Write(poolerFatal(l.p.localized.Load()))
			drain()
			return
		}
		first = false
		if _, err := l.client.Write(msg); err != nil {
			return
		}
		if cut(plan-1) == afterReady && msg[0] == 'Z' {
			return
		}
	}
}

// TestCutAnywhereAppliesOnce breaks the connection of an Update at every
// point of its two round trips that matter (the first, which carries
// BEGIN, and the commit's, which carries a held write and COMMIT), in each
// of pgx's query modes, and with the server terminating the backend while
// the commit's held write waits on a lock. The Update inserts a task row of
// its own and renames a merchant, neither idempotent. Whatever it reports,
// what it did must agree: a success (after a run again or not) wrote once,
// an unknown outcome at most once, any other error nothing; and the
// outcome is unknown only where the server could not be asked.
func TestCutAnywhereAppliesOnce(t *testing.T) {
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			p := newCutter(t)
			app := "kassa_cut_" + rand.Text()[:8]
			u := freshSchema(t) + "&default_query_exec_mode=" + mode
			s := openNow(t, p.via(u)+"&application_name="+app)
			direct := openNow(t, u)
			putMerchantM1(t, direct)
			ctx := context.Background()
			db, err := pgx.Connect(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close(ctx)

			// settled waits until no transaction of the store's is open on
			// the server (one whose client is gone ends when the server
			// finds out), and has the pool hand out, and drop, a
			// connection the proxy closed after the last answer.
			settled := func() {
				t.Helper()
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					var open int
					if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND xact_start IS NOT NULL`, app).Scan(&open); err != nil {
						t.Fatal(err)
					}
					if open == 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%d transactions still open", open)
					}
				}
				if _, err := merchantOf(s); err != nil {
					t.Fatal(err)
				}
			}
			run := func(name string, first, beforeCommit func(), unknownAllowed bool) {
				t.Helper()
				p.fired.Store(false)
				if _, err := db.Exec(ctx, `DELETE FROM tasks`); err != nil {
					t.Fatal(err)
				}
				if err := direct.Update(ctx, func(tx storage.Tx) error {
					return tx.PutMerchant(&storage.Merchant{ID: "m1", ClientID: "c1", Name: "m"})
				}); err != nil {
					t.Fatal(err)
				}
				attempts := 0
				began, wrote := false, false
				err := s.Update(ctx, func(tx storage.Tx) error {
					attempts++
					if !began && first != nil {
						first()
					}
					began = true
					if err := renameAndSchedule(tx); err != nil {
						return err
					}
					if !wrote && beforeCommit != nil {
						beforeCommit()
					}
					wrote = true
					return nil
				})
				fired := p.disarm()
				p.refuse.Store(false)
				settled()
				var tasks int
				if err := db.QueryRow(ctx, `SELECT count(*) FROM tasks`).Scan(&tasks); err != nil {
					t.Fatal(err)
				}
				renamed := strings.Count(merchantName(t, direct), "+")
				unknown := fault.CodeOf(err) == fault.CodeOutcomeUnknown
				report := fmt.Sprintf("%s: %v after %d attempts (cut fired %v); %d tasks, renamed %d times", name, err, attempts, fired, tasks, renamed)
				t.Log(report)
				switch {
				case tasks != renamed:
					t.Errorf("%s: not atomic", report)
				case err == nil && tasks != 1:
					t.Errorf("%s: a success must have written once", report)
				case !fired:
					t.Errorf("%s: the proxy cut nothing", report)
				case unknown && (tasks > 1 || !unknownAllowed):
					t.Errorf("%s: an unknown outcome, where the server could say", report)
				case err != nil && !unknown && tasks != 0:
					t.Errorf("%s: an error that is no unknown outcome must have written nothing", report)
				}
			}

			// The first round trip (BEGIN, the merchant's read).
			for _, c := range []cut{dropTrip, closeBoth, noAnswer, halfFirst, poolerFirst, afterReady} {
				c := c
				// afterReady: the commit's round trip goes out on a
				// connection the proxy closed, and its answer never
				// comes: no id was read, so nothing can be asked.
				run("begin/"+c.String(), func() { p.arm(c) }, nil, c == afterReady)
			}
			// The commit's round trip (the task's insert, the probe, COMMIT).
			// Cut before the probe's answer, the transaction's id is not
			// known, so the server cannot be asked about it.
			for _, c := range []cut{dropTrip, closeBoth, noAnswer, halfFirst, atCommit, halfCommit, afterReady, poolerFirst, poolerAtCommit} {
				c := c
				beforeProbe := c != atCommit && c != halfCommit && c != afterReady && c != poolerAtCommit
				run("commit/"+c.String(), nil, func() { p.arm(c) }, beforeProbe)
			}
			// A FATAL whose severity is written in the server's language
			// (lc_messages) is a FATAL all the same: read as an ordinary
			// error, one in COMMIT's place was answered "nothing done"
			// (an Internal error) for a commit the server had made.
			p.localized.Store(true)
			for _, c := range []cut{poolerFirst, poolerAtCommit} {
				run("commit/"+c.String()+"/localized", nil, func() { p.arm(c) }, c == poolerFirst)
			}
			p.localized.Store(false)
			// The same, with the server gone once the cut is made: where
			// COMMIT may have run, the outcome is unknown, not "nothing was
			// done". (At COMMIT's answer, the server is asked about for 5 s:
			// TestCommitAnswerLostAndServerGone.)
			for _, c := range []cut{noAnswer, poolerFirst} {
				c := c
				run("commit/"+c.String()+"/refused", nil, func() { p.refuse.Store(true); p.arm(c) }, true)
			}
			// The server ends the backend while the commit's round trip
			// waits on a lock (its held write): FATAL 57P01 answers the
			// held write, and COMMIT never ran.
			run("commit/terminatedWaiting", nil, func() { p.fired.Store(true); terminateWhenWaiting(t, u, app) }, false)
			// ... and while it waits for the client, before the commit's
			// round trip is sent.
			run("commit/terminatedIdle", nil, func() { p.fired.Store(true); cutConnections(t, app) }, false)
		})
	}
}

// TestCaptureWithoutKeyWhoseCommitAnswerIsLost: a capture sent with no
// idempotency key, whose COMMIT's answer is lost, in the query modes a
// transaction pooler needs (exec, simple_protocol). pgx reported the lost
// answer as "conn closed", which pgconn.SafeToRetry calls never sent, so
// the capture ran again after it had committed and was answered as a
// conflict (the order was captured already). Now the server is asked, and
// the capture is answered as made, and made once.
func TestCaptureWithoutKeyWhoseCommitAnswerIsLost(t *testing.T) {
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			p := newCutter(t)
			p.commitText.Store(true)
			s := openNow(t, p.via(freshSchema(t)+"&default_query_exec_mode="+mode))
			l, merchantID, orderID := ledgerWithOrder(t, s)
			p.arm(atCommit)
			_, err := l.Capture(context.Background(), kassa.Call{MerchantID: merchantID}, orderID, &capture.FullRequest{})
			if !p.disarm() {
				t.Fatal("the proxy cut no COMMIT answer")
			}
			if err != nil {
				t.Fatalf("capture whose COMMIT answer was lost: %v", err)
			}
			wantCapturedOnce(t, l, merchantID, orderID)
		})
	}
}

// TestCommitOnAConnectionBrokenBeforeRunsAgain: a function that goes on
// after a statement failed on a connection the server had ended (an error
// it ignores) commits on a closed connection: nothing of the commit's round
// trip is sent, and the server rolled the transaction back, so it runs
// again, in every query mode, rather than failing with an unknown outcome.
func TestCommitOnAConnectionBrokenBeforeRunsAgain(t *testing.T) {
	for _, mode := range []string{"cache_statement", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			app := "kassa_cut_" + rand.Text()[:8]
			s := openNow(t, freshSchema(t)+"&default_query_exec_mode="+mode+"&application_name="+app)
			putMerchantM1(t, s)
			cutOnFirstAttempt(t, s, app, "m1", "commit after an ignored failure", func(tx storage.Tx, m *storage.Merchant, first bool) error {
				if first {
					if _, err := tx.GetMerchant("m1"); err == nil {
						return errors.New("a read on a cut connection succeeded")
					}
				}
				return tx.ScheduleTask(&storage.Task{ID: "task-1", Kind: "autoCapture", MerchantID: m.ID, OrderID: "o", DueAt: time.Now().Add(time.Hour)})
			})
		})
	}
}

// terminateWhenWaiting locks the tasks table on a connection of its own,
// and once a backend of app waits for that lock, terminates it and lets the
// lock go.
func terminateWhenWaiting(t *testing.T, u, app string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `BEGIN; LOCK TABLE tasks IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer conn.Close(ctx)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			var n int
			if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n); err != nil {
				t.Error(err)
				return
			}
			if n > 0 {
				return
			}
		}
		t.Error("no backend waited for the lock")
	}()
}

// merchantOf reads merchant m1 through s.
func merchantOf(s storage.Store) (*storage.Merchant, error) {
	var m *storage.Merchant
	err := s.View(context.Background(), func(tx storage.Tx) (err error) {
		m, err = tx.GetMerchant("m1")
		return err
	})
	return m, err
}

// renameAndSchedule is the write of the cut tests: "+" added to merchant
// m1's name, and a task with a random id, a write held back to travel with
// COMMIT; the two counted after tell how often it committed.
func renameAndSchedule(tx storage.Tx) error {
	m, err := tx.GetMerchant("m1")
	if err != nil {
		return err
	}
	m.Name += "+"
	if err := tx.PutMerchant(m); err != nil {
		return err
	}
	return tx.ScheduleTask(&storage.Task{ID: rand.Text(), Kind: "autoCapture", MerchantID: "m1", OrderID: "o", DueAt: time.Now().Add(time.Hour)})
}
