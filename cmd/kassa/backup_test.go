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
	"testing"
	"time"

	"github.com/kassahq/kassa/storage/bolt"
)

// TestBackupWhileWritingRestores: GET /backup on the operations listener,
// taken while orders are being created, restores (unpacked into a new data
// directory, a server started on it) every order acknowledged before the
// backup was asked for, in a file the store's own check passes; the access
// tokens of the old server still work (the signing key is in it), and so is
// the sandbox clock. The API's port does not serve it: a backup holds every
// merchant's data and the signing key.
func TestBackupWhileWritingRestores(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	creds := []string{"--client-id", "demo", "--client-secret", "demo-secret-123"}
	const backupToken = "backup-token-0123456789abcdef"
	base, ops, done := serveWithOps(t, append([]string{"--data", data, "--addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0", "--backup-token", backupToken}, creds...)...)
	running := true
	defer func() {
		if running {
			stopInProcess(t, done)
		}
	}()
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
		mu    sync.Mutex
		acked []string
		errs  []error
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	for w := range 2 {
		wg.Go(func() {
			for i := 0; i < 2000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id, err := create(w*10000 + i)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					acked = append(acked, id)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer halt()
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()
	if len(before) == 0 {
		t.Fatalf("no order acknowledged before the backup: %v", errs)
	}

	req, _ := http.NewRequest(http.MethodGet, ops+"/backup", nil)
	req.Header.Set("Authorization", "Bearer "+backupToken)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("backup: %d %q %v: %.300s", resp.StatusCode, resp.Header.Get("Content-Type"), err, archive)
	}
	if left, _ := filepath.Glob(filepath.Join(data, ".backup*")); len(left) > 0 {
		t.Errorf("the backup left %v behind", left)
	}
	time.Sleep(100 * time.Millisecond) // writes go on after it too
	halt()
	stopInProcess(t, done)
	running = false
	if len(errs) > 0 {
		t.Fatalf("writes failed while the backup ran: %v", errs)
	}
	t.Logf("%d orders acknowledged before the backup, %d in all; archive of %d bytes", len(before), len(acked), len(archive))

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
		t.Errorf("the restored store fails its check: %v", err)
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
