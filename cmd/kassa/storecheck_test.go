package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage/bolt"
)

// soundStore fills a bolt store through the library (fillForCopy) and
// returns its data directory.
func soundStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	fillForCopy(t, dir, func() time.Time { at = at.Add(time.Second); return at })
	return dir
}

// runStoreCheck runs kassa store check on dir and says that it left the file
// byte for byte as it was.
func runStoreCheck(t *testing.T, dir string) (code int, out string) {
	t.Helper()
	path := filepath.Join(dir, "kassa.db")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	code = run([]string{"store", "check", "--data", dir}, &o, &e)
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(before) != sha256.Sum256(after) {
		t.Fatal("store check changed the file")
	}
	return code, o.String() + e.String()
}

// TestStoreCheckSound: a store filled through the library checks clean,
// with the records of each kind counted.
func TestStoreCheckSound(t *testing.T) {
	dir := soundStore(t)
	code, out := runStoreCheck(t, dir)
	if code != 0 {
		t.Fatalf("store check of a sound store: exit %d\n%s", code, out)
	}
	for _, want := range []string{"merchants 2", "orders 8", "customer tokens 1", "sessions 1", "settlements 2",
		"settlement queue items 2"} {
		if !regexp.MustCompile(`(?m)^` + strings.ReplaceAll(want, " ", ` +`) + `\b`).MatchString(out) {
			t.Errorf("no line %q in\n%s", want, out)
		}
	}
	if !strings.Contains(out, "kassa.db is sound") {
		t.Errorf("no verdict in\n%s", out)
	}
}

// TestStoreCheckRefuses: a store a server holds, and a directory with no
// store, are refused with exit 2, nothing checked.
func TestStoreCheckRefuses(t *testing.T) {
	dir := soundStore(t)
	st, err := bolt.Open(filepath.Join(dir, "kassa.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	code := run([]string{"store", "check", "--data", dir}, &o, &e)
	st.Close()
	if code != 2 || !strings.Contains(e.String(), "in use") {
		t.Fatalf("store check of a store in use: exit %d, %s%s", code, o.String(), e.String())
	}
	o.Reset()
	e.Reset()
	if code := run([]string{"store", "check", "--data", t.TempDir()}, &o, &e); code != 2 || !strings.Contains(e.String(), "no store") {
		t.Fatalf("store check of an empty directory: exit %d, %s%s", code, o.String(), e.String())
	}
}

// TestStoreCheckFindsDamage: each kind of damage is found, named on its own
// line, and the check exits 1.
func TestStoreCheckFindsDamage(t *testing.T) {
	sound := soundStore(t)
	raw, err := os.ReadFile(filepath.Join(sound, "kassa.db"))
	if err != nil {
		t.Fatal(err)
	}
	// editOrder rewrites the first stored order that pick takes.
	editOrder := func(pick func(o *order.Order) bool) func(btx *bbolt.Tx) error {
		return func(btx *bbolt.Tx) error {
			b := btx.Bucket([]byte("orders"))
			c := b.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				l, n := binary.Uvarint(v)
				head, js := v[:n+int(l)], v[n+int(l):]
				var o order.Order
				if err := json.Unmarshal(js, &o); err != nil {
					return err
				}
				if !pick(&o) {
					continue
				}
				js, err := json.Marshal(&o)
				if err != nil {
					return err
				}
				return b.Put(bytes.Clone(k), append(bytes.Clone(head), js...))
			}
			return fmt.Errorf("no order to edit")
		}
	}
	for _, c := range []struct {
		name string
		// damage edits the file through bbolt; page, when set, writes over
		// the file's bytes instead.
		damage func(btx *bbolt.Tx) error
		page   func(t *testing.T, b []byte, path string)
		want   string // a line of the report, as a pattern
	}{
		{name: "corrupted page", page: func(t *testing.T, b []byte, path string) {
			db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			var root uint64
			db.View(func(btx *bbolt.Tx) error { root = uint64(btx.Bucket([]byte("orders")).Root()); return nil })
			ps := db.Info().PageSize
			db.Close()
			if root == 0 {
				t.Fatal("the orders bucket is inline: no page of its own to damage")
			}
			copy(b[int(root)*ps:], bytes.Repeat([]byte{0x5a}, ps))
		}, want: `(?m)^page: `},
		{name: "undecodable record", damage: func(btx *bbolt.Tx) error {
			b := btx.Bucket([]byte("custtokens"))
			k, _ := b.Cursor().First()
			return b.Put(bytes.Clone(k), []byte(`{"tokenId": 7`))
		}, want: `(?m)^record customer tokens "[^"]+" \{token:[0-9a-f]{12}\}: unexpected end of JSON input$`},
		{name: "index entry without its record", damage: func(btx *bbolt.Tx) error {
			return btx.Bucket([]byte("taskdue")).Put([]byte("\x80\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00gone"), []byte{1})
		}, want: `(?m)^index taskdue ".*gone": indexes nothing stored$`},
		{name: "record without its index entry", damage: func(btx *bbolt.Tx) error {
			b := btx.Bucket([]byte("orderindex"))
			k, _ := b.Cursor().First()
			return b.Delete(bytes.Clone(k))
		}, want: `(?m)^index orderindex ".*": is missing$`},
		{name: "refund beyond its capture", damage: editOrder(func(o *order.Order) bool {
			if len(o.Refunded) == 0 {
				return false
			}
			l := &o.Refunded[0].Lines[0]
			l.UnitPrice, l.TotalAmount = l.UnitPrice+100, l.TotalAmount+100
			return true
		}), want: `(?m)^order orders ".*": capture \S+: refunded \d+ of \d+$`},
		{name: "line total disagrees", damage: editOrder(func(o *order.Order) bool {
			if len(o.Uncaptured.Lines) == 0 {
				return false
			}
			o.Uncaptured.Lines[0].TotalAmount++
			return true
		}), want: `(?m)^order orders ".*": line \S+ of sub-order \S+: totalAmount \d+, quantity × \(unitPrice − unitDiscountAmount\) \d+$`},
		{name: "sequence behind", damage: func(btx *bbolt.Tx) error {
			b := btx.Bucket([]byte("sequences"))
			c := b.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				if bytes.HasSuffix(k, []byte("invoice")) {
					return b.Put(bytes.Clone(k), binary.BigEndian.AppendUint64(nil, 0))
				}
			}
			return fmt.Errorf("no invoice series")
		}, want: `(?m)^sequence sequences ".*invoice": is at 0, but [1-9][0-9]* was given out$`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "kassa.db")
			b := bytes.Clone(raw)
			if c.page != nil {
				if err := os.WriteFile(path, b, 0o600); err != nil {
					t.Fatal(err)
				}
				c.page(t, b, path)
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if c.damage != nil {
				db, err := bbolt.Open(path, 0o600, nil)
				if err != nil {
					t.Fatal(err)
				}
				err = db.Update(c.damage)
				db.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			code, out := runStoreCheck(t, dir)
			if code != 1 {
				t.Fatalf("exit %d, want 1\n%s", code, out)
			}
			if !regexp.MustCompile(c.want).MatchString(out) {
				t.Fatalf("no line matching %s in\n%s", c.want, out)
			}
			t.Logf("\n%s", out)
			if !strings.Contains(out, ", checked in") {
				t.Fatalf("no summary in\n%s", out)
			}
		})
	}
}
