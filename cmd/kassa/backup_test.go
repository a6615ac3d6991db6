package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage/bolt"
)

// TestBackupWhileWritingRestores: GET /backup on the operations listener,
// taken while orders are being created, restores (unpacked into a new data
// directory, a server started on it) every order acknowledged before the
// backup was asked for, and none begun after the copy of the store began,
// in a file the store's own check passes; the access tokens of the old
// server still work (the signing key is in it), and so is the sandbox
// clock. The API's port does not serve it: a backup holds every merchant's
// data and the signing key.
//
// The copy is held after its first write until orders begun after that are
// acknowledged, so commits are certain to land while it runs: a copy of the
// file off the disk, not as of one read transaction, then restores a store
// whose pages were reused under it.
func TestBackupWhileWritingRestores(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	// The store is made ahead and its file grown to 16 MiB, which bbolt
	// maps whole when serve opens it: the commits while the copy is held
	// never have to grow the map, which would wait for the copy's read
	// transaction to end.
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if st, err := bolt.Open(filepath.Join(data, "kassa.db"), bolt.Options{}); err != nil {
		t.Fatal(err)
	} else if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(data, "kassa.db"), 16<<20); err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	letGo := sync.OnceFunc(func() { close(release) })
	backupCopy = func(w io.Writer) io.Writer { return &holdWriter{w: w, held: held, release: release} }
	defer func() { backupCopy = func(w io.Writer) io.Writer { return w } }()

	creds := []string{"--client-id", "demo", "--client-secret", "demo-secret-123"}
	const backupToken = "backup-token-0123456789abcdef"
	base, ops, done := serveWithOps(t, append([]string{"--data", data, "--addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0", "--backup-token", backupToken}, creds...)...)
	running := true
	defer func() {
		if running {
			stopInProcess(t, done)
		}
	}()
	defer letGo() // a test failed while the copy is held must not hang the server's stop
	c := &client{t: t, base: base}
	c.token("demo", "demo-secret-123")
	c.do("POST", "/sandbox/v1/clock", `{"advance":"10m"}`, "", 200, nil)

	if resp, err := http.Get(base + "/backup"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the API's port answered /backup %d, want 404", resp.StatusCode)
	}

	// create makes one order; it answers its id once acknowledged.
	create := func(n int) (string, error) {
		var mint struct{ AuthorizationToken string }
		if err := post(c, "/sandbox/v1/authorization-tokens", `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"companyId":"5560000001"}}`, "", 201, &mint); err != nil {
			return "", err
		}
		var created struct{ OrderID string }
		err := post(c, "/v1/authorization-tokens/"+mint.AuthorizationToken+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE",
			"orderLines":[{"description":"Tiles","quantity":2,"unitPrice":125000,"vat":2500}]}`, fmt.Sprintf("k-%d", n), 200, &created)
		return created.OrderID, err
	}
	var (
		mu     sync.Mutex
		acked  []string
		during []string // begun once the copy was held: after its read transaction began
		errs   []error
		wg     sync.WaitGroup
		late   atomic.Bool
	)
	stop := make(chan struct{})
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				begunLate := late.Load()
				id, err := create(w*1000000 + i)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					acked = append(acked, id)
					if begunLate {
						during = append(during, id)
					}
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	// halt lets a held copy go first: a writer may be waiting for it.
	halt := sync.OnceFunc(func() { letGo(); close(stop); wg.Wait() })
	defer halt()
	// waitFor polls until cond holds under mu, failing the test after 20 s.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			mu.Lock()
			ok, n, e := cond(), len(acked), errs
			mu.Unlock()
			if ok {
				return
			}
			if len(e) > 0 || time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %d orders acknowledged; errors %v", what, n, e)
			}
		}
	}
	waitFor("orders before the backup", func() bool { return len(acked) >= 20 })
	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()

	type result struct {
		archive []byte
		err     error
		resp    *http.Response
	}
	got := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, ops+"/backup", nil)
		req.Header.Set("Authorization", "Bearer "+backupToken)
		resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		archive, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- result{archive, err, resp}
	}()
	select {
	case <-held:
	case r := <-got:
		t.Fatalf("the backup ended without copying the store: %v %+v", r.err, r.resp)
	case <-time.After(20 * time.Second):
		t.Fatal("the backup did not begin copying the store")
	}
	late.Store(true)
	waitFor("orders while the copy is held", func() bool { return len(during) >= 10 })
	letGo()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	archive, resp := r.archive, r.resp
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("backup: %d %q: %.300s", resp.StatusCode, resp.Header.Get("Content-Type"), archive)
	}
	if left, _ := filepath.Glob(filepath.Join(data, ".backup*")); len(left) > 0 {
		t.Errorf("the backup left %v behind", left)
	}
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	waitFor("orders after the backup", func() bool { return len(acked) >= n+5 })
	halt()
	stopInProcess(t, done)
	running = false
	if len(errs) > 0 {
		t.Fatalf("writes failed while the backup ran: %v", errs)
	}
	t.Logf("%d orders acknowledged before the backup, %d begun while its copy was held, %d in all; archive of %d bytes", len(before), len(during), len(acked), len(archive))

	restored := filepath.Join(dir, "restored")
	names := untar(t, archive, restored)
	for _, want := range []string{"kassa.db", "server.key", "sandbox-clock.json"} {
		if !contains(names, want) {
			t.Errorf("the backup holds %v, not %s", names, want)
		}
	}
	for _, f := range []string{"server.key", "sandbox-clock.json"} {
		a, _ := os.ReadFile(filepath.Join(data, f))
		b, _ := os.ReadFile(filepath.Join(restored, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s restored as %q, was %q", f, b, a)
		}
	}
	st, err := bolt.Open(filepath.Join(restored, "kassa.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Check(); err != nil {
		t.Fatalf("the restored store fails its check: %v", err)
	}
	st.Close()

	base, _, done = serveWithOps(t, append([]string{"--data", restored, "--addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0"}, creds...)...)
	defer stopInProcess(t, done)
	c.base = base // the old server's access token: the key came along
	for _, id := range before {
		if o := c.order(id); o.OrderAmount.MinorUnits != 250000 {
			t.Fatalf("restored order %s: %+v", id, o)
		}
	}
	for _, id := range during {
		c.do("GET", "/v1/orders/"+id, "", "", http.StatusNotFound, nil)
	}
}

// holdWriter passes writes to w; after the first it closes held and waits
// for release, holding the copy of the store midway.
type holdWriter struct {
	w       io.Writer
	once    sync.Once
	held    chan<- struct{}
	release <-chan struct{}
}

func (h *holdWriter) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	h.once.Do(func() { close(h.held); <-h.release })
	return n, err
}

// post sends a request as client.do does, but answers a failure as an
// error, for the test's writer goroutines, which must not call Fatal.
func post(c *client, path, body, key string, want int, out any) error {
	req, _ := http.NewRequest("POST", c.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.bearer)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s: %d: %s", path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

// untar unpacks archive into dir and returns the names it held.
func untar(t *testing.T, archive []byte, dir string) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatalf("archive: %v (after %v)", err, names)
		}
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(h.Name) {
			t.Fatalf("archive entry %q of type %c", h.Name, h.Typeflag)
		}
		names = append(names, h.Name)
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, h.FileInfo().Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStartRemovesABackupSpoolOfAnyAge: a backup's spool file is a whole
// copy of kassa.db, left in the data directory when the process died during
// the backup. A supervisor restarts it within seconds, so a spool younger
// than the ten minutes other leftovers are given stayed for as long as that
// run lasted. Once the store is open, no other server can be writing one
// (bbolt's lock), so the start removes it whatever its age.
func TestStartRemovesABackupSpoolOfAnyAge(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	spool := filepath.Join(data, ".backup.123456")
	if err := os.WriteFile(spool, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	_, done := serveInProcess(t, "--data", data, "--addr", "127.0.0.1:0")
	defer stopInProcess(t, done)
	if _, err := os.Stat(spool); err == nil {
		t.Errorf("a backup spool left by a run that died a moment ago is still there after the start")
	}
}

// TestBackupHoldsWhatIsThereAndOnlyFiles: a backup of a directory without
// a sandbox clock (a server run with --sandbox=false) holds the store, the
// key and every companies/*.csv file, skips what is no regular file, and
// ends as a complete tar (its two zero blocks); the start's sweep of spool
// files leaves a directory of that name alone.
func TestBackupHoldsWhatIsThereAndOnlyFiles(t *testing.T) {
	data := t.TempDir()
	st, err := bolt.Open(filepath.Join(data, "kassa.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	files := map[string]string{"server.key": "00ff\n", "companies/SE.csv": "id,name\n5560360793,Göta Bygg AB\n", "companies/NO.csv": "id,name\n"}
	for name, content := range files {
		p := filepath.Join(data, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"companies/old.csv", ".backup.dir"} {
		if err := os.Mkdir(filepath.Join(data, filepath.FromSlash(d)), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var archive bytes.Buffer
	if err := writeBackup(&archive, data, st); err != nil {
		t.Fatal(err)
	}
	if b := archive.Bytes(); len(b) < 1024 || !bytes.Equal(b[len(b)-1024:], make([]byte, 1024)) {
		t.Error("the archive does not end with tar's two zero blocks")
	}
	restored := t.TempDir()
	names := untar(t, archive.Bytes(), restored)
	if got, want := strings.Join(names, " "), "kassa.db server.key companies/NO.csv companies/SE.csv"; got != want {
		t.Errorf("the backup holds %s, want %s", got, want)
	}
	for name, content := range files {
		if b, _ := os.ReadFile(filepath.Join(restored, filepath.FromSlash(name))); string(b) != content {
			t.Errorf("%s restored as %q, want %q", name, b, content)
		}
	}
	if n, err := removeBackupSpools(data); n != 0 || err != nil {
		t.Errorf("the spool sweep removed %d, %v; want none", n, err)
	}
	if left, _ := filepath.Glob(filepath.Join(data, ".backup*")); len(left) != 1 {
		t.Errorf("the data directory holds %v after the backup, want only the directory", left)
	}
}
