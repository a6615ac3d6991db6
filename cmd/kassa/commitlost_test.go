package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// commitCutter is a TCP proxy to the test database that loses the answer to
// a COMMIT: once a client has sent a statement holding marker, the server's
// next CommandComplete COMMIT is not passed on and the connection is cut,
// so the server has committed and the client cannot tell. With refuse, the
// proxy then refuses new connections, so the store cannot ask the server
// what became of the transaction.
type commitCutter struct {
	t      *testing.T
	ln     net.Listener
	marker []byte
	refuse bool
	armed  atomic.Bool
	cut    atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

// cutCommitAfter starts a commitCutter and returns it and url (a
// pgtest.FreshSchema URL) sent through it.
func cutCommitAfter(t *testing.T, dbURL, marker string, refuse bool) (*commitCutter, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &commitCutter{t: t, ln: ln, marker: []byte(marker), refuse: refuse}
	target := u.Host
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.refuse && p.cut.Load() {
				c.Close()
				continue
			}
			d, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, d)
			p.mu.Unlock()
			go p.fromClient(d, c)
			go p.fromServer(c, d)
		}
	}()
	t.Cleanup(p.close)
	u.Host = ln.Addr().String()
	q := u.Query()
	q.Set("sslmode", "disable") // the proxy reads the server's messages
	u.RawQuery = q.Encode()
	return p, u.String()
}

func (p *commitCutter) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *commitCutter) fromClient(server, client net.Conn) {
	defer server.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if !p.cut.Load() && bytes.Contains(buf[:n], p.marker) {
				p.armed.Store(true)
			}
			if _, err := server.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *commitCutter) fromServer(client, server net.Conn) {
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
		if msg[0] == 'C' && string(msg[5:]) == "COMMIT\x00" && p.armed.Load() && p.cut.CompareAndSwap(false, true) {
			return
		}
		if _, err := client.Write(msg); err != nil {
			return
		}
	}
}

// TestStoreCopyCommitAnswerLost: the connection breaks after the copy's
// COMMIT was sent, and the database committed it. store copy said "nothing
// was copied (the database holds no record …)", which was false; now it
// says the outcome is unknown and that a rerun is safe, and a rerun is:
// it is refused on the copied data and adds nothing.
func TestStoreCopyCommitAnswerLost(t *testing.T) {
	dbURL := pgtest.FreshSchema(t)
	t.Setenv("KASSA_KEY", "")
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "kassa.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := kassa.New(st, kassa.Options{}).EnsureMerchant(context.Background(), kassa.MerchantOptions{Name: "m", Sandbox: true}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	p, via := cutCommitAfter(t, dbURL, "ANALYZE ", false)

	var out, errb bytes.Buffer
	code := run([]string{"store", "copy", "--data", dir, "--database-url", via}, &out, &errb)
	if !p.cut.Load() {
		t.Fatalf("the proxy cut no COMMIT answer: %d %s", code, errb.String())
	}
	if code != 1 || strings.Contains(errb.String(), "nothing was copied") || !strings.Contains(errb.String(), "kassa store copy: whether the copy was committed is unknown; running kassa store copy again is safe") {
		t.Fatalf("copy whose COMMIT answer was lost: exit %d, stderr %s", code, errb.String())
	}
	merchants := func() int {
		db, err := postgres.Open(context.Background(), dbURL, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.Pool().QueryRow(context.Background(), `SELECT count(*) FROM merchants`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := merchants(); n != 1 {
		t.Fatalf("merchants in the database after the lost answer: %d, want the copy committed", n)
	}
	errb.Reset()
	if code := run([]string{"store", "copy", "--data", dir, "--database-url", dbURL}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "already holds kassa data") {
		t.Fatalf("the rerun: exit %d, stderr %s", code, errb.String())
	}
	if n := merchants(); n != 1 {
		t.Fatalf("merchants after the rerun: %d, want 1", n)
	}
}

// TestSettleCommitAnswerLost: the connection breaks after the settlement
// run's COMMIT was sent, and the database, which committed it, cannot be
// reached to ask. settle says the outcome is unknown and that a rerun is
// safe, and a rerun settles nothing twice.
func TestSettleCommitAnswerLost(t *testing.T) {
	dbURL := pgtest.FreshSchema(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l := kassa.New(db, kassa.Options{})
	creds, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m", Sandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	captureOneLine(t, l, creds.MerchantID, "t", time.Now(), "tiles", 10000)
	p, via := cutCommitAfter(t, dbURL, "INSERT INTO settlements ", true)

	var out, errb bytes.Buffer
	code := run([]string{"settle", "--store", "postgres", "--database-url", via, "--data", t.TempDir()}, &out, &errb)
	if !p.cut.Load() {
		t.Fatalf("the proxy cut no COMMIT answer: %d %s %s", code, out.String(), errb.String())
	}
	if code != 1 || strings.Contains(out.String(), "settlements") || !strings.Contains(errb.String(), "kassa settle: whether the settlements were written is unknown; running kassa settle again is safe") {
		t.Fatalf("settle whose COMMIT answer was lost: exit %d, stdout %q, stderr %s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"settle", "--store", "postgres", "--database-url", dbURL, "--data", t.TempDir()}, &out, &errb); code != 0 || out.String() != "0 settlements\n" {
		t.Fatalf("the rerun: exit %d, stdout %q", code, out.String())
	}
	page, err := l.ListSettlements(ctx, creds.MerchantID, settlement.Query{})
	if err != nil || len(page.Settlements) != 1 || page.Settlements[0].GrossAmount.MinorUnits != 10000 {
		t.Fatalf("settlements after the lost answer and the rerun: %+v %v, want one of 100.00", page.Settlements, err)
	}
}
