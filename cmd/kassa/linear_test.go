package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kassahq/kassa/internal/linear"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// Three `kassa serve --store postgres` processes on one schema answer
// concurrent captures, refunds, cancels, edits, reference changes, GETs and
// lists on a few orders, each request to a replica drawn at random, with
// linearizable histories: a GET on one replica after a change another one
// acknowledged shows it (each process has its own caches of rendered
// responses, decoded orders and merchants). server's
// TestConcurrentHistoriesAreLinearizable runs the same check in one
// process; this one runs the binary. Skipped without KASSA_TEST_DATABASE_URL
// and with -short.
func TestReplicaProcessesAreLinearizable(t *testing.T) {
	u := pgtest.FreshSchema(t)
	dir, bin := buildKassa(t)
	var bases []string
	for i := range 3 {
		cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data", string(rune('a'+i))),
			"--store", "postgres", "--database-url", u, "--client-id", "lin", "--client-secret", "lin-secret-123", "--log-level", "error")
		stdout, _ := cmd.StdoutPipe()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		})
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if _, rest, ok := strings.Cut(lines.Text(), "listening on "); ok {
				base, _, _ := strings.Cut(rest, " ")
				bases = append(bases, base)
				go func() {
					for lines.Scan() {
					}
				}()
				break
			}
		}
		if len(bases) != i+1 {
			t.Fatalf("replica %d did not start: %s", i, stderr.String())
		}
	}
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth("lin", "lin-secret-123")
	c := linear.Cluster{Bases: bases, Auth: r.Header.Get("Authorization")}
	for run := range 2 {
		tally, err := linear.Verify(context.Background(), c, linear.Workload{Orders: 3, Clients: 6, OpsPerOrder: 50, Seed: uint64(run + 1)})
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		t.Logf("run %d: %v", run, tally)
	}
}
