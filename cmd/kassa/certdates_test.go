package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestCertificateDatesWarnedAtStart: a certificate every client will refuse
// (expired, not valid yet) is logged as an error at start, one that ends
// within two weeks as a warning, and a good one not at all.
func TestCertificateDatesWarnedAtStart(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name                string
		notBefore, notAfter time.Time
		want                string // level and a word of the message; "" for no line
	}{
		{"expired", now.AddDate(-1, 0, 0), now.Add(-time.Minute), `"level":"ERROR","msg":"the TLS certificate has expired`},
		{"not yet valid", now.Add(time.Hour), now.AddDate(1, 0, 0), `"level":"ERROR","msg":"the TLS certificate is not valid yet`},
		{"ends in 13 days", now.AddDate(0, -3, 0), now.Add(13 * 24 * time.Hour), `"level":"WARN","msg":"the TLS certificate expires soon`},
		{"ends in 15 days", now.AddDate(0, -3, 0), now.Add(15 * 24 * time.Hour), ""},
	} {
		var buf bytes.Buffer
		warnCertificateDates(slog.New(slog.NewJSONHandler(&buf, nil)), "tls.crt", &x509.Certificate{NotBefore: tt.notBefore, NotAfter: tt.notAfter}, now)
		if got := buf.String(); tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s: logged %q, want %q", tt.name, got, tt.want)
		}
	}

	// The pair serve loads carries its parsed certificate.
	certFile, keyFile := writeSelfSigned(t, t.TempDir())
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil || cert.Leaf == nil {
		t.Fatalf("the loaded pair has no parsed certificate (%v): its dates would never be checked", err)
	}
}
