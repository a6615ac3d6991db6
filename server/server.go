// Package server serves kassa's /v1 interface over HTTP. It is thin by
// design: decode → validate shape → call the kassa library → encode. No
// business rule lives here; failures carry a kind that one table (statusOf)
// maps to an HTTP status and an RFC 9457 problem document.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/company"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/sandbox"
	"github.com/kassahq/kassa/token"
)

// minKeyLen is the least length of Config.Key: HMAC-SHA256's own output size.
const minKeyLen = 32

// Config configures a Server.
type Config struct {
	Ledger *kassa.Ledger
	Logger *slog.Logger
	// Key signs access tokens, checkout and document links; at least 32
	// random bytes, the same on every replica. Empty: a random key of this
	// Server's own, so its tokens and links do not outlive it and another
	// replica refuses them. New panics on a key of 1 to 31 bytes.
	Key []byte
	// BaseURL is the public address of the server, e.g.
	// "https://kassa.example.com", or with the path prefix a proxy or the
	// embedder's mux (http.StripPrefix) takes off before kassa sees a
	// request, e.g. "https://platform.example.com/payments". Checkout and
	// document links are it with their path appended; Location headers are
	// its path with theirs. A trailing slash is ignored. Empty: links and
	// Location headers are paths from the root of the host.
	BaseURL string
	// Sandbox enables /sandbox/v1 (test clock, buyer simulation, fixtures).
	Sandbox bool
	// Clock is the server's clock (the sandbox test clock when Sandbox is on).
	// Orders, tasks and expiry take their time from the store's transactions,
	// not from it: open the store with its Now as the store's clock
	// (bolt.Options.Clock, postgres.Options.Clock), as kassa serve does, or
	// POST /sandbox/v1/clock moves what it answers and nothing else. Nil:
	// real time that cannot be moved (NewClock(false)), so the sandbox's
	// POST /sandbox/v1/clock answers 403 clock_fixed; a sandbox whose clock
	// moves needs NewClock(true).
	Clock *Clock
	// MaxBodyBytes caps request bodies; zero or less means the default, 1 MiB.
	MaxBodyBytes int64
	// AccessTokenTTL is the lifetime of OAuth access tokens; zero or less
	// means the default, 1 h.
	AccessTokenTTL time.Duration
	// DocumentLinkTTL is how long a signed document link stays valid; zero
	// or less means the default, 7 days.
	DocumentLinkTTL time.Duration
	// Ready reports whether the server can take traffic (for /readyz).
	Ready func(ctx context.Context) error
	// Version is reported by /healthz.
	Version string
	// Metrics receives request and commit figures; a new registry when nil.
	Metrics *Metrics
	// Companies is the directory of company search; the bundled dataset when nil.
	Companies *company.Directory
	// CompanySearchRate is the per-address rate limit of company search
	// (requests per second, with a burst of ten times that, at least one);
	// zero, less or NaN means the default, 20. A refused search's
	// Retry-After is the whole seconds until the address may search again.
	CompanySearchRate float64
	// TrustedProxies are the networks of the reverse proxies or load
	// balancers in front of the server. A request from one of them is rate
	// limited by the client address its X-Forwarded-For names (the last one
	// not itself trusted), not by the proxy's, which every client behind it
	// shares. Empty: the peer's address, whatever a request's header says.
	TrustedProxies []netip.Prefix
	// Delivery tunes the notification deliverer that the sandbox's
	// jobs/notifications endpoint runs.
	Delivery kassa.DeliveryOptions
	// StoreTimeout bounds how long a request may wait for the store, from
	// its start: past it, a transaction that has not sent its commit is
	// rolled back and the request answered 503 store_unavailable with
	// Retry-After (a commit already sent is still waited for, so a change
	// is never reported failed once committed). Without it a request waits
	// on a lock held elsewhere as long as its client does, and such waiters
	// can take every database connection. Zero means none; kassa serve
	// sets 10 s.
	StoreTimeout time.Duration
	// BodyMemory bounds the request bodies held decoded at once, in bytes:
	// a request with a JSON body takes the bytes of its body of it (all of
	// it, for a body larger than the whole bound) once the body has been
	// read in full and before it is decoded, and gives it back when it
	// ends. A request that has not got its share when StoreTimeout passes
	// is answered 503 server_busy with Retry-After, its body read but not
	// decoded and nothing done. It bounds the memory of requests being
	// decoded and waiting for the store, each of which holds about twice
	// its body decoded (up to twenty times, counting decoding's garbage and
	// the collector's headroom), which the connection limit alone let grow
	// until the process was killed. A body still arriving takes no share:
	// it holds only the bytes sent so far, and a slow sender must not keep
	// other requests waiting. Zero means none; kassa serve sets 16 MiB.
	BodyMemory int64
	// SeparateOps takes /metrics off Handler, which then answers it 404
	// like any unknown route and leaves it out of /openapi.json: it is
	// served by OpsHandler only, which kassa serve puts on a listener of
	// its own (--ops-addr). /healthz and /readyz stay on both.
	SeparateOps bool
	// Backup writes an online backup of the store's data to w, for GET
	// /backup on OpsHandler only (never on Handler: it holds every
	// merchant's data and the signing key). It must write nothing before
	// it can no longer fail but for w; an error after its first byte cuts
	// the response short so the client cannot take it for a whole one.
	// Nil (PostgreSQL, whose backup is pg_dump's): /backup answers 409
	// backup_unsupported.
	Backup func(w io.Writer) error
	// BackupToken is the secret a GET /backup must send as
	// "Authorization: Bearer …": the archive holds every merchant's data
	// and the signing key, and the operations listener is often open to a
	// whole internal network (scrapers). Empty: /backup is not served.
	BackupToken string
}

// Server is the HTTP front of a kassa Ledger.
type Server struct {
	cfg     Config
	ledger  *kassa.Ledger
	log     *slog.Logger
	router  *httprouter.Router
	ops     *httprouter.Router // the operations routes, for OpsHandler
	metrics *Metrics
	limiter *rateLimiter
	budget  *bodyBudget // nil without Config.BodyMemory
	served  []string    // "METHOD pattern" of every route, for the OpenAPI coverage test
	backup  sync.Mutex  // held by the backup under way: one at a time
	// mount is the path of BaseURL ("" or e.g. "/payments"): the library's
	// Location paths are kassa's own, without the prefix a proxy or an
	// embedder's mux took off before the request reached us.
	mount string
	// openAPI is the document Handler serves at /openapi.json.
	openAPI func() []byte
	// draining is set by Drain: /readyz says the server is stopping.
	draining atomic.Bool
	// failures logs the 503 answers of a cause at a bounded rate.
	failures *failureLog
}

// Drain makes /readyz answer 503 {"status":"draining"} from now on, while
// every other route is served as before: a load balancer polling it stops
// sending new requests to this replica before it stops listening, instead of
// finding out from refused connections (kassa serve --shutdown-delay).
func (s *Server) Drain() { s.draining.Store(true) }

// New builds a Server and its routes. It panics on a Config.Key of 1 to 31
// bytes, which would sign what anyone could soon forge.
func New(cfg Config) *Server {
	switch {
	case len(cfg.Key) == 0:
		// Signing with the empty key would let anyone who knows the
		// token format act as any merchant whose id they have seen.
		cfg.Key = make([]byte, minKeyLen)
		rand.Read(cfg.Key)
	case len(cfg.Key) < minKeyLen:
		panic(fmt.Sprintf("server: Config.Key has %d bytes, want at least %d random bytes", len(cfg.Key), minKeyLen))
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	var mount string
	if u, err := url.Parse(cfg.BaseURL); err == nil {
		mount = u.EscapedPath()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = slog.New(requestLog{cfg.Logger.Handler()})
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	var budget *bodyBudget
	if cfg.BodyMemory > 0 {
		budget = newBodyBudget(cfg.BodyMemory)
	}
	// Zero or less takes the default: a negative lifetime would issue
	// tokens and links already expired, and a negative rate refuse every
	// company search.
	if cfg.AccessTokenTTL <= 0 {
		cfg.AccessTokenTTL = time.Hour
	}
	if cfg.DocumentLinkTTL <= 0 {
		cfg.DocumentLinkTTL = 7 * 24 * time.Hour
	}
	if cfg.Clock == nil {
		cfg.Clock = NewClock(false)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Companies == nil {
		cfg.Companies = company.Bundled(SandboxCompanies())
	}
	if !(cfg.CompanySearchRate > 0) { // NaN too, which no comparison holds for
		cfg.CompanySearchRate = 20
	}
	s := &Server{cfg: cfg, ledger: cfg.Ledger, log: cfg.Logger, metrics: cfg.Metrics, mount: mount, budget: budget,
		limiter: newRateLimiter(cfg.CompanySearchRate, max(1, 10*cfg.CompanySearchRate)), failures: newFailureLog(cfg.Logger)}
	s.openAPI = func() []byte { return servedOpenAPI(cfg.Sandbox, cfg.SeparateOps) }
	if mount != "" {
		s.openAPI = sync.OnceValue(func() []byte { return openAPIFor(cfg.Sandbox, cfg.SeparateOps, mount) })
	}
	s.routes()
	return s
}

// Metrics returns the server's metrics registry (the store wrapper records into it).
func (s *Server) Metrics() *Metrics { return s.metrics }

// Handler returns the root HTTP handler with logging, request ids, metrics
// and panic recovery around the router.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(s.router, slog.LevelInfo, w, r) })
}

// OpsHandler returns the handler of the operations routes (/healthz,
// /readyz, /metrics) for a listener of their own on an internal network;
// see Config.SeparateOps. Its requests are logged at debug level: a
// scraper and probes call every few seconds, which at info would bury the
// API's lines. They are counted in the metrics as the API's are, by route.
func (s *Server) OpsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(s.ops, slog.LevelDebug, w, r) })
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
	route  string // pattern of the matched route, set by the route wrapper
	held   int64  // bytes of the body budget the request holds (holdBody), given back as it ends
	code   string // the problem's code (or OAuth error) of a refusal, for the access log
	head   bool   // the request is a HEAD, routed as GET
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (a backup
// extends its write deadline).
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// noteCode records the code of a refusal for the access log, which with the
// status alone could not tell a version conflict from an amount over the
// uncaptured one, or a store outage from a lock wait.
func noteCode(w http.ResponseWriter, code string) {
	if sr, ok := w.(*statusRecorder); ok {
		sr.code = code
	}
}

// ambiguousPath reports a path the router would read differently from the
// client: an encoded slash (%2F is decoded before routing, so
// "/v1/orders/x%2Fcapture" would reach the capture route) or an empty
// segment.
func ambiguousPath(u *url.URL) bool {
	return strings.Contains(u.Path, "//") || (u.RawPath != "" && strings.Contains(strings.ToLower(u.RawPath), "%2f"))
}

// checkQuery refuses a query string that does not decode. net/http's Query
// drops such a pair without a word, so "?id=%zz" would list every order as
// if no filter had been sent; the refusal names the parameter. It makes the
// checks url.ParseQuery makes, pair by pair, without building the map the
// handler builds again (QueryUnescape allocates only for an escape).
func checkQuery(raw string) error {
	for pair := range strings.SplitSeq(raw, "&") {
		key, value, _ := strings.Cut(pair, "=")
		name, kerr := url.QueryUnescape(key)
		if kerr != nil {
			name = key
		}
		if _, verr := url.QueryUnescape(value); kerr != nil || verr != nil || strings.Contains(pair, ";") {
			return fault.Invalidf(name, "is not URL-encoded: escape %%, ; and non-ASCII characters")
		}
	}
	return nil
}

// singleHeaders are the request headers that must have one value: net/http
// hands a handler the first of several lines, while a proxy, a log or the
// client's own record may show another (other credentials, another media
// type or encoding of the body, another key).
var singleHeaders = []string{"Authorization", "Content-Type", "Content-Encoding", "Idempotency-Key"}

// checkHeaders refuses a request giving any of singleHeaders in several
// lines that differ, naming each such header (a line repeated as it is, a
// proxy adding it again, is one value), or an empty Idempotency-Key: a
// client whose key came out empty meant to send one, and served as keyless
// its retry would run again.
func checkHeaders(h http.Header) error {
	var f fault.Fields
	for _, name := range singleHeaders {
		if differ(h.Values(name)) {
			f.Add(name, "is given more than once")
		}
	}
	if vs := h.Values("Idempotency-Key"); len(vs) > 0 && vs[0] == "" {
		f.Add("Idempotency-Key", "is empty; send a unique key, or no header for a request without one")
	}
	return f.Err()
}

func (s *Server) serve(router *httprouter.Router, level slog.Level, w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := r.Header.Get("X-Request-Id")
	if !validRequestID(id) {
		id = newRequestID()
	}
	w.Header().Set("X-Request-Id", id)
	// No response is to be read as another type than it says: a JSON body
	// holding merchant text must never be sniffed into HTML.
	w.Header().Set("X-Content-Type-Options", "nosniff")
	ctx := context.WithValue(r.Context(), requestIDKey, id)
	if s.cfg.StoreTimeout > 0 {
		untimed := ctx
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.cfg.StoreTimeout, errStoreTimeout)
		defer cancel()
		ctx = context.WithValue(ctx, untimedKey{}, untimed)
	}
	r = r.WithContext(ctx)
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	rec := &statusRecorder{ResponseWriter: w, route: "unmatched", head: r.Method == http.MethodHead}
	method := r.Method // as sent: HEAD is routed as GET below
	// The body budget's share is given back however the request ends: an
	// answer, a panic, a client gone.
	defer func() {
		if rec.held > 0 {
			s.budget.release(rec.held)
		}
	}()
	defer func() {
		// http.ErrAbortHandler cuts a response short on purpose (a backup
		// that failed half-way): it is logged and counted as the request
		// it was, then raised again so net/http drops the connection
		// instead of ending the body as if it were whole.
		aborted := false
		if p := recover(); p == http.ErrAbortHandler {
			aborted = true
			defer panic(p)
		} else if p != nil {
			s.log.ErrorContext(ctx, "panic", slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			if rec.status == 0 {
				s.writeError(rec, r, fault.Internalf(errRecovered, "panic"))
			}
		}
		d := time.Since(start)
		route := rec.route
		s.metrics.ObserveRequest(methodLabel(method), route, rec.status, d)
		if rec.status >= 200 && rec.status < 300 {
			// A route that failed with a cause answers again: it ended.
			s.failures.succeeded(ctx, r.Method+" "+route)
		}
		attrs := []slog.Attr{
			slog.String("requestId", id), slog.String("method", method), slog.String("path", logPath(r.URL.Path, route != "unmatched")),
			slog.String("route", route), slog.Int("status", rec.status), slog.Int("bytes", rec.bytes),
			slog.Float64("durationMs", float64(d.Microseconds())/1000), slog.String("merchantId", merchantOf(r.Context())),
		}
		// A success has no code: an empty one would only be noise to
		// filter out of every query on the field.
		if rec.code != "" {
			attrs = append(attrs, slog.String("code", rec.code))
		}
		if aborted {
			attrs = append(attrs, slog.Bool("aborted", true))
		}
		s.log.LogAttrs(ctx, level, "request", attrs...)
	}()
	if ambiguousPath(r.URL) {
		s.writeError(rec, r, fault.NotFoundf("route_not_found", "no route %s %s", r.Method, r.URL.EscapedPath()))
		return
	}
	if err := checkQuery(r.URL.RawQuery); err != nil {
		s.refuse(rec, r, err)
		return
	}
	if err := checkHeaders(r.Header); err != nil {
		s.refuse(rec, r, err)
		return
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		// Refused before a byte of the body is read: a client that sent
		// "Expect: 100-continue" is never asked for it, and the server
		// reads none of a body it would refuse once read.
		s.refuse(rec, r, errBodyTooLarge(s.cfg.MaxBodyBytes))
		return
	}
	if r.Method == http.MethodHead {
		// HEAD is GET without the body; r is this handler's copy, so
		// net/http still knows to send none.
		if h, _, _ := router.Lookup(http.MethodGet, r.URL.Path); h != nil {
			r.Method = http.MethodGet
		}
	}
	router.ServeHTTP(rec, r)
}

// tokenPrefixes begin the paths whose next segment is an authorization or
// customer token: a credential that, with the merchant's, creates an order or
// charges the buyer, so it must not reach a log shipped to a log store.
var tokenPrefixes = []string{"/v1/authorization-tokens/", "/v1/customer-tokens/"}

// logPath is path as the access log shows it: a token segment is replaced
// by "{token:FP}", FP the first 12 hex digits of the token's SHA-256, which
// finds a token's requests without giving the token (tokens are random, so
// the digest does not lead back to one). On a route that did not match, the
// token's place is unknown (another case, "//", an encoded slash, a typo
// after it), and so is where the token routes' prefix begins (a base URL
// joined with one slash too many, "//v1/…", a dot segment, "/sandbox" in
// front): everything after the first segment naming a token, in any case
// and wherever it is, is one fingerprint.
func logPath(path string, matched bool) string {
	if !matched {
		i := strings.Index(strings.ToLower(path), "token")
		if i < 0 {
			return path
		}
		j := strings.IndexByte(path[i:], '/')
		if j < 0 || i+j+1 == len(path) {
			return path
		}
		return fingerprinted(path[:i+j+1], path[i+j+1:], "")
	}
	for _, p := range tokenPrefixes {
		if len(path) <= len(p) || path[:len(p)] != p {
			continue
		}
		tok, tail := path[len(p):], ""
		if i := strings.IndexByte(tok, '/'); i >= 0 {
			tok, tail = tok[:i], tok[i:]
		}
		return fingerprinted(path[:len(p)], tok, tail)
	}
	return path
}

// fingerprinted is head, tok's fingerprint and tail.
func fingerprinted(head, tok, tail string) string {
	return head + token.Fingerprint(tok) + tail
}

// requestLog adds the request id of a record's context to every line the
// server logs while serving a request (an internal error, a failed render,
// /readyz's reason), so that the line is found from the requestId a client
// quotes; the logger's own handler does not read the context.
type requestLog struct{ slog.Handler }

func (h requestLog) Handle(ctx context.Context, r slog.Record) error {
	if id := requestID(ctx); id != "" {
		has := false
		r.Attrs(func(a slog.Attr) bool {
			has = a.Key == "requestId"
			return !has
		})
		if !has {
			r = r.Clone()
			r.AddAttrs(slog.String("requestId", id))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestLog) WithAttrs(as []slog.Attr) slog.Handler {
	return requestLog{h.Handler.WithAttrs(as)}
}

func (h requestLog) WithGroup(name string) slog.Handler { return requestLog{h.Handler.WithGroup(name)} }

// errRecovered is the cause of the 500 that answers a handler's panic,
// which is logged with its stack where it is recovered: writeError does not
// log it again.
var errRecovered = errors.New("panic, logged with its stack")

// untimedKey holds a request's context before Config.StoreTimeout.
type untimedKey struct{}

// jobContext is r's context without Config.StoreTimeout, for the sandbox's
// job endpoints: each runs a whole background job through HTTP (many
// transactions; notification POSTs of up to 10 s each), which the
// per-request bound would cut midway, answering work it had committed as
// failed and leaving POSTs it had sent unrecorded. It keeps r's values and
// still ends when the client hangs up; each job bounds its own steps.
func jobContext(r *http.Request) context.Context {
	if untimed, ok := r.Context().Value(untimedKey{}).(context.Context); ok {
		return valuesOf{untimed, r.Context()}
	}
	return r.Context()
}

// valuesOf is a context that ends as its Context does, with the values of
// values.
type valuesOf struct {
	context.Context
	values context.Context
}

func (c valuesOf) Value(key any) any { return c.values.Value(key) }

// errStoreTimeout is the cause of a request context that Config.StoreTimeout
// ended: the server stopped waiting, not the client.
var errStoreTimeout = errors.New("the request waited for the store longer than the server's store timeout")

// methodLabel bounds the metrics' method label: any token is a valid method
// name, and a series per name a client invents would grow the registry
// (and the memory it holds) without limit.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}

// handle registers a route; the wrapper records the route pattern for
// metrics and logs, so that ids in paths do not blow up the label set.
func (s *Server) handle(method, pattern string, h httprouter.Handle) {
	s.served = append(s.served, method+" "+pattern)
	s.handleOn(s.router, method, pattern, false, h)
}

// handleAuthed registers a route that needs a merchant, as handle does.
func (s *Server) handleAuthed(method, pattern string, h httprouter.Handle) {
	s.served = append(s.served, method+" "+pattern)
	s.handleOn(s.router, method, pattern, true, h)
}

// handleOn registers a route on router, with handle's wrapper. On a route
// that needs a merchant the caller is authenticated before its query is
// checked: a caller without credentials learns nothing of the parameters
// the route reads, as every refusal it gets is the 401.
func (s *Server) handleOn(router *httprouter.Router, method, pattern string, auth bool, h httprouter.Handle) {
	params, checked := apiQuery[method+" "+pattern], queryChecked(pattern)
	router.Handle(method, pattern, func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		if sr, ok := w.(*statusRecorder); ok {
			sr.route = pattern
		}
		if auth {
			// An answer to credentials is the merchant's alone and changes
			// with every operation on it: no browser or intermediary may
			// keep it (RFC 9111 §5.2.2.5), errors included.
			w.Header().Set("Cache-Control", "no-store")
			m, err := s.authenticate(r)
			if err != nil {
				if fault.Is(err, fault.Unauthorized) {
					// Client credentials are taken as Basic too, so the
					// 401 offers it, first: clients that send Basic only
					// when challenged for it (Java's HttpClient with an
					// Authenticator, which reads the first scheme of a
					// challenge line only, and of the first line only in
					// early releases; .NET's Credentials; curl --anyauth)
					// stay at 401 for ever on Bearer's alone. writeError
					// adds Bearer's.
					w.Header().Set("WWW-Authenticate", `Basic realm="kassa"`)
				}
				s.writeError(w, r, err)
				return
			}
			*r = *r.WithContext(context.WithValue(r.Context(), merchantKey, m))
		}
		if checked {
			if err := params.check(r.URL.RawQuery); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		h(w, r, p)
	})
}

func (s *Server) call(r *http.Request) kassa.Call {
	// writeResult only writes the answer out (ReadOnlyBody).
	return kassa.Call{MerchantID: merchantOf(r.Context()), IdempotencyKey: r.Header.Get("Idempotency-Key"), ReadOnlyBody: true}
}

// writeResult answers with a library result, marking replays.
func (s *Server) writeResult(w http.ResponseWriter, r *http.Request, res *kassa.Result, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if res.Location != "" {
		w.Header().Set("Location", s.mount+res.Location)
	}
	writeRaw(w, res.Status, res.Body)
}

// SandboxCompanies are the sandbox's fixture buyers as directory entries, so
// that a buyer searching for them finds them.
func SandboxCompanies() []company.Company {
	fixtures := sandbox.Fixtures()
	out := make([]company.Company, 0, len(fixtures))
	for _, f := range fixtures {
		out = append(out, company.Company{ID: company.NormalizeNumber(f.CompanyID), Name: f.CompanyName, Country: f.Country})
	}
	return out
}
