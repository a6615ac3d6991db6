package bolt

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/storage"
)

// TestSigningKeyRecordedAndChecked: the first SigningKey records the key's
// check value (never the key) durably, later ones refuse another key with
// ErrOtherSigningKey, also after the file was last written by another build
// (whose index marks Open forgets), until ForgetSigningKey; a read-only open
// checks without writing, and the file with the value dumps and checks clean.
func TestSigningKeyRecordedAndChecked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kassa.db")
	a, b := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SigningKey(a); err != nil {
		t.Fatalf("first key: %v", err)
	}
	if err := st.SigningKey(a); err != nil {
		t.Fatalf("the same key again: %v", err)
	}
	if err := st.SigningKey(b); !errors.Is(err, ErrOtherSigningKey) {
		t.Fatalf("another key: %v, want ErrOtherSigningKey", err)
	}
	if err := st.DB().View(func(btx *bbolt.Tx) error {
		if v := btx.Bucket(bInfo).Get(keySigningKey); !bytes.Equal(v, storage.SigningKeyCheck(a)) || bytes.Contains(v, a) {
			t.Errorf("recorded %x, want the check value of the key", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Another writer's commit last: Open drops the index marks, not this.
	if err := st.DB().Update(func(btx *bbolt.Tx) error { return markCommit(btx, openIndexes-1) }); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := st.SigningKey(b); !errors.Is(err, ErrOtherSigningKey) {
		t.Fatalf("another key after another writer: %v, want ErrOtherSigningKey", err)
	}
	st.Close()

	ro, err := OpenReadOnly(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		key  []byte
		want error
	}{{"the key", a, nil}, {"another", b, ErrOtherSigningKey}, {"none", nil, ErrOtherSigningKey}} {
		if err := ro.SigningKey(c.key); !errors.Is(err, c.want) {
			t.Errorf("read-only, %s: %v, want %v", c.name, err, c.want)
		}
	}
	if err := ro.Dump(context.Background(), func(storage.Record) error { return nil }); err != nil {
		t.Errorf("dump of a file recording the key: %v", err)
	}
	if _, err := ro.Check(context.Background(), func(p Problem) { t.Errorf("check: %v", p) }); err != nil {
		t.Fatal(err)
	}
	ro.Close()

	if st, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if forgot, err := st.ForgetSigningKey(context.Background()); !forgot || err != nil {
		t.Fatalf("forget: %v %v", forgot, err)
	}
	if forgot, err := st.ForgetSigningKey(context.Background()); forgot || err != nil {
		t.Fatalf("forget again: %v %v, want nothing to forget", forgot, err)
	}
	if err := st.SigningKey(b); err != nil {
		t.Fatalf("another key after forgetting: %v", err)
	}
	if err := st.SigningKey(a); !errors.Is(err, ErrOtherSigningKey) {
		t.Fatalf("the old key after b was recorded: %v, want ErrOtherSigningKey", err)
	}
}
