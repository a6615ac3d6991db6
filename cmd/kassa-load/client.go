package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// client talks to one kassa server with Basic credentials.
type client struct {
	base, auth string
	http       *http.Client
}

func newClient(base, id, secret string, conns int) *client {
	tr := &http.Transport{MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, IdleConnTimeout: time.Minute,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(id, secret)
	return &client{base: strings.TrimRight(base, "/"), auth: r.Header.Get("Authorization"),
		http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// errNoAnswer marks a request whose outcome is unknown (connection lost):
// the server may or may not have applied it.
var errNoAnswer = errors.New("no answer")

type response struct {
	status int
	body   []byte
	hdr    http.Header
}

func (c *client) do(ctx context.Context, method, path string, body any, key string) (response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return response{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Authorization", c.auth)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	return response{status: resp.StatusCode, body: b, hdr: resp.Header}, nil
}

// apiOrder is the part of the order record the tool reads.
type apiOrder struct {
	ID               string `json:"id"`
	OrderAmount      money  `json:"orderAmount"`
	CapturedAmount   money  `json:"capturedAmount"`
	RefundedAmount   money  `json:"refundedAmount"`
	UncapturedAmount money  `json:"uncapturedAmount"`
	Captured         []struct {
		LedgerID         string `json:"ledgerId"`
		TotalOrderAmount money  `json:"totalOrderAmount"`
	} `json:"captured"`
	Refunded []struct {
		LedgerID string `json:"ledgerId"`
	} `json:"refunded"`
	Uncaptured struct {
		OrderLines []struct {
			ID          string `json:"id"`
			TotalAmount int64  `json:"totalAmount"`
		} `json:"orderLines"`
	} `json:"uncaptured"`
	Status []string `json:"status"`
}

type money struct {
	MinorUnits int64 `json:"minorUnits"`
}
