package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEndToEnd builds the real binary, starts it on a fresh data directory
// and walks the spec's partial-capture example over HTTP: token → order →
// partial capture of a line with id (it leaves uncaptured) → partial capture
// of a line without id (uncaptured unchanged) → edit of the remainder →
// refund → read. Then it stops the server with SIGTERM and checks that a
// restart on the same data still serves the order.
func TestEndToEnd(t *testing.T) {
	dir, bin := buildKassa(t)
	data := filepath.Join(dir, "data")
	base, stop := startServer(t, bin, data)

	c := &client{t: t, base: base}
	c.token("demo", "demo-secret-123")
	var mint struct{ AuthorizationToken string }
	c.do("POST", "/sandbox/v1/authorization-tokens", `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"companyId":"5560000001"}}`, "", 201, &mint)
	var created struct{ OrderID string }
	c.do("POST", "/v1/authorization-tokens/"+mint.AuthorizationToken+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE",
		"orderLines":[{"description":"Tiles","quantity":2,"unitPrice":125000,"vat":2500},
		              {"description":"Grout","quantity":4,"unitPrice":10000,"vat":2500},
		              {"description":"Delivery","quantity":1,"unitPrice":50000,"vat":2500}]}`, "k-create", 200, &created)
	o := c.order(created.OrderID)
	if got := o.OrderAmount.MinorUnits; got != 340000 {
		t.Fatalf("orderAmount = %d, want 340000", got)
	}
	if len(o.Events) != 2 || o.Events[0].Type != "create" || o.Events[0].Amount.MinorUnits != 340000 || o.Events[1].Type != "readyForCapture" || o.Events[1].Amount.MinorUnits != 0 {
		t.Fatalf("creation events = %+v", o.Events)
	}
	tiles := o.Uncaptured.OrderLines[0].ID

	// Row 1: a line with id leaves uncaptured.
	c.do("POST", "/v1/orders/"+o.ID+"/partialcapture", fmt.Sprintf(`{"orderLines":[{"id":%q}],"totalCaptureAmount":250000}`, tiles), "k-cap1", 200, nil)
	o = c.order(o.ID)
	if o.CapturedAmount.MinorUnits != 250000 || o.UncapturedAmount.MinorUnits != 90000 || len(o.Uncaptured.OrderLines) != 2 || len(o.Captured) != 1 {
		t.Fatalf("after capture by id: captured %d uncaptured %d lines %d", o.CapturedAmount.MinorUnits, o.UncapturedAmount.MinorUnits, len(o.Uncaptured.OrderLines))
	}
	last := o.Events[len(o.Events)-1]
	if last.Type != "partialCapture" || last.Amount.MinorUnits != 250000 || last.CreatedAt != o.UpdatedAt {
		t.Fatalf("last event %+v, updatedAt %s", last, o.UpdatedAt)
	}
	if !contains(o.Status, "partiallyCaptured") {
		t.Fatalf("status %v lacks partiallyCaptured", o.Status)
	}

	// Row 2: a line without id (2 of the 4 grout) leaves uncaptured unchanged.
	c.do("POST", "/v1/orders/"+o.ID+"/partialcapture", `{"orderLines":[{"description":"Grout","quantity":2,"unitPrice":10000,"vat":2500}],"totalCaptureAmount":20000}`, "k-cap2", 200, nil)
	o = c.order(o.ID)
	if o.CapturedAmount.MinorUnits != 270000 || o.UncapturedAmount.MinorUnits != 90000 || o.OrderAmount.MinorUnits != 360000 {
		t.Fatalf("after capture without id: captured %d uncaptured %d order %d", o.CapturedAmount.MinorUnits, o.UncapturedAmount.MinorUnits, o.OrderAmount.MinorUnits)
	}
	// …then the edit that reduces the remaining grout to the 2 not yet captured.
	c.do("POST", "/v1/orders/"+o.ID, `{"orderLines":[{"description":"Grout","quantity":2,"unitPrice":10000,"vat":2500},{"description":"Delivery","quantity":1,"unitPrice":50000,"vat":2500}],
		"totalOrderAmount":70000,"totalOrderAmountExclVat":56000,"totalOrderVatAmount":14000}`, "k-edit", 200, nil)
	o = c.order(o.ID)
	if o.UncapturedAmount.MinorUnits != 70000 || o.OrderAmount.MinorUnits != 340000 {
		t.Fatalf("after edit: uncaptured %d order %d", o.UncapturedAmount.MinorUnits, o.OrderAmount.MinorUnits)
	}

	// A retry of the first capture replays; nothing is captured twice.
	resp := c.raw("POST", "/v1/orders/"+o.ID+"/partialcapture", fmt.Sprintf(`{"orderLines":[{"id":%q}],"totalCaptureAmount":250000}`, tiles), "k-cap1")
	if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %q", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
	}
	c.do("POST", "/v1/orders/"+o.ID+"/partialrefund/"+o.Captured[0].LedgerID, `{"orderLines":[{"description":"Broken tile","quantity":1,"unitPrice":12500,"vat":2500}],"totalRefundAmount":12500}`, "k-ref", 200, nil)
	o = c.order(o.ID)
	if o.CapturedAmount.MinorUnits != 270000 || o.RefundedAmount.MinorUnits != 12500 || !contains(o.Status, "partiallyRefunded") {
		t.Fatalf("after refund: captured %d refunded %d status %v", o.CapturedAmount.MinorUnits, o.RefundedAmount.MinorUnits, o.Status)
	}

	stop()
	base, stop = startServer(t, bin, data)
	defer stop()
	c.base = base
	c.token("demo", "demo-secret-123")
	if again := c.order(o.ID); again.RefundedAmount.MinorUnits != 12500 || again.CapturedAmount.MinorUnits != 270000 {
		t.Fatalf("after restart: %+v", again)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func startServer(t *testing.T, bin, data string) (string, func()) {
	t.Helper()
	cmd, base := launch(t, bin, data)
	return base, stopper(t, cmd)
}

// stopper is the stop of a server launched: SIGTERM, then its exit waited for.
func stopper(t *testing.T, cmd *exec.Cmd) func() {
	stopped := false
	return func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server exit after SIGTERM: %v", err)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("server did not stop on SIGTERM")
		}
	}
}

type apiMoney struct {
	Amount     string `json:"amount"`
	MinorUnits int64  `json:"minorUnits"`
}

type apiOrder struct {
	ID                                                            string
	Status                                                        []string
	UpdatedAt                                                     string
	OrderAmount, CapturedAmount, RefundedAmount, UncapturedAmount apiMoney
	Captured                                                      []struct{ LedgerID string }
	Uncaptured                                                    struct {
		OrderLines []struct{ ID string }
	}
	Events []struct {
		Type      string
		CreatedAt string
		Amount    apiMoney
	}
}

type client struct {
	t      *testing.T
	base   string
	bearer string
}

func (c *client) token(id, secret string) {
	req, _ := http.NewRequest("POST", c.base+"/oauth/token", strings.NewReader("grant_type=client_credentials"))
	req.SetBasicAuth(id, secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&tr) != nil || tr.AccessToken == "" {
		c.t.Fatalf("token: %d", resp.StatusCode)
	}
	c.bearer = tr.AccessToken
}

func (c *client) raw(method, path, body, key string) *http.Response {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.bearer)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

func (c *client) do(method, path, body, key string, want int, out any) {
	c.t.Helper()
	resp := c.raw(method, path, body, key)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

func (c *client) order(id string) apiOrder {
	var o apiOrder
	c.do("GET", "/v1/orders/"+id, "", "", 200, &o)
	return o
}

var _ = os.Getenv

// buildKassa builds the kassa binary into a new temporary directory, for a
// test that runs it as a process; it returns the directory and the binary.
// Such tests are skipped with -short.
func buildKassa(t *testing.T) (dir, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir = t.TempDir()
	bin = filepath.Join(dir, "kassa")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return dir, bin
}
