package kassa

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/notify"
	"github.com/kassahq/kassa/storage"
)

// DeliveryOptions tune the notification deliverer; zero values take the defaults.
type DeliveryOptions struct {
	// Client sends the POSTs; default: one client shared by every run, 10 s
	// timeout, redirects not followed, no proxy, and non-public addresses
	// refused unless AllowPrivateNetworks. A client of your own replaces
	// that address check too: its dialer must refuse what yours must.
	Client *http.Client
	// Retry is the backoff schedule; each of its fields zero or negative
	// takes its value in notify.DefaultRetry(). A receiver's Retry-After
	// (with 429 or 503) lengthens a wait, up to Retry.Cap.
	Retry notify.Retry
	// Batch is how many due messages one run claims; default 50, at most 10 000.
	Batch int
	// Parallel is how many POSTs are in flight at once; default 8. A
	// merchant gets one until its first POST of the run has answered.
	Parallel int
	// Lease is how long a claimed message is hidden from other deliverers
	// (other replicas, or this one after a crash); default 2 min, well above
	// the client timeout, so one live deliverer owns a message at a time.
	Lease time.Duration
	// RandN draws jitter: uniform in [0, n); default math/rand/v2.Int64N.
	RandN func(n int64) int64
	// WallClock stamps signatures, which receivers compare with their own
	// clock; default time.Now. Scheduling follows the store's clock.
	WallClock func() time.Time
	// AllowPrivateNetworks lets the default client deliver to loopback,
	// private and link-local addresses, and to the ports browsers refuse.
	// Off, a merchant cannot point kassa at the operator's internal
	// services, nor at a mail server's port; sandboxes and tests turn it on
	// to receive on 127.0.0.1.
	AllowPrivateNetworks bool
	// SkipSlowReceivers makes a run leave alone the merchants whose receiver
	// a run of this Ledger last found slow (an answer after half the
	// client's timeout, a timeout, no connection, 429 or 5xx), for a lease
	// from then, and post nothing more to one it finds slow. Such a run
	// waits on no receiver known to be slow, so that, kept beside the
	// usual runs (as kassa serve keeps one), it delivers the other
	// merchants' notifications while slow receivers hold up every other run.
	SkipSlowReceivers bool
}

func (o DeliveryOptions) withDefaults() DeliveryOptions {
	if o.Client == nil {
		if o.AllowPrivateNetworks {
			o.Client = privateNetworksClient()
		} else {
			o.Client = publicClient()
		}
	}
	// Each field defaults on its own, as Options.Policy's periods do: a
	// schedule with only MaxAttempts set had no delays at all (a zero Base
	// or Cap), so a receiver down for a minute used up every attempt in as
	// many runs; a negative Base made the jitter's draw panic.
	def := notify.DefaultRetry()
	if o.Retry.Base <= 0 {
		o.Retry.Base = def.Base
	}
	if o.Retry.Cap <= 0 {
		o.Retry.Cap = def.Cap
	}
	if o.Retry.MaxAttempts <= 0 {
		o.Retry.MaxAttempts = def.MaxAttempts
	}
	if o.Batch <= 0 {
		o.Batch = 50
	}
	o.Batch = min(o.Batch, maxBatch)
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	if o.Lease <= 0 {
		o.Lease = 2 * time.Minute
	}
	if o.RandN == nil {
		o.RandN = rand.Int64N
	}
	if o.WallClock == nil {
		o.WallClock = time.Now
	}
	return o
}

// The default clients are made once, so that every run reuses their
// kept-alive connections: a client per run left each run's connections (and
// their goroutines) idle until the transport's timeout, and paid a new
// handshake for every POST.
var (
	publicClient          = sync.OnceValue(func() *http.Client { return newDeliveryClient(false) })
	privateNetworksClient = sync.OnceValue(func() *http.Client { return newDeliveryClient(true) })
)

func newDeliveryClient(allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if !allowPrivate {
		dialer.Control = refusePrivate
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = dialer.DialContext
	tr.Proxy = nil             // a proxy would dial on our behalf, past the address check
	tr.MaxIdleConnsPerHost = 8 // the default Parallel: a run's connections to one receiver are kept for the next
	// Under the usual idle timeouts of receivers' servers (60 s and more),
	// so that a POST rarely meets a connection the receiver is closing.
	tr.IdleConnTimeout = 30 * time.Second
	// An answer's headers mean nothing to us; the default limit (10 MiB)
	// let a receiver make each of the Parallel POSTs hold that much.
	tr.MaxResponseHeaderBytes = maxAnswerHeaderBytes
	return &http.Client{Timeout: 10 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// maxAnswerHeaderBytes bounds the headers of a receiver's answer; past it
// the attempt fails.
const maxAnswerHeaderBytes = 64 << 10

// refusePrivate is a dialer Control that refuses, after name resolution,
// addresses that are not on the public internet, and the bad ports.
func refusePrivate(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return err
	}
	if !publicAddr(ap.Addr()) {
		return refusedError("refusing to deliver to a non-public address")
	}
	if slices.Contains(badPorts, ap.Port()) {
		return refusedError(fmt.Sprintf("refusing to deliver to port %d, which serves a protocol other than HTTP", ap.Port()))
	}
	return nil
}

// refusedError is the address check's refusal. It names no address: the
// address is what the URL's host resolved to inside the operator's network,
// and the merchant reads the refusal in the delivery log.
type refusedError string

func (e refusedError) Error() string { return string(e) }

// deliveryErrorText is a failed POST's error as the merchant's delivery log
// shows it, without what the attempt learnt inside the operator's network:
// a refusal leaves out the address dialled (the dial error names it), and a
// failed lookup the resolver that answered it.
func deliveryErrorText(err error) string {
	var (
		ue      *url.Error
		refused refusedError
		dns     *net.DNSError
	)
	if errors.As(err, &refused) && errors.As(err, &ue) {
		return fmt.Sprintf("%s %q: %s", ue.Op, ue.URL, refused)
	}
	if errors.As(err, &dns) && dns.Server != "" {
		// A copy: concurrent lookups of one name share the error.
		anon := *dns
		anon.Server = ""
		return strings.Replace(err.Error(), dns.Error(), anon.Error(), 1)
	}
	return err.Error()
}

// badPorts are the Fetch standard's (https://fetch.spec.whatwg.org/#bad-port),
// which browsers refuse for the same reason: a POST's body is the merchant's
// to shape (its URL's path and the payload's strings), and on a line-based
// protocol's port (mail, IRC, SIP) a server takes its lines as commands,
// spam sent from the operator's address or a NAT opened by a forged SIP
// message. Any other port stays open: receivers listen on 8443 and the like.
var badPorts = []uint16{0, 1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101,
	102, 103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514,
	515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659,
	4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080}

// nonPublic are the special-purpose blocks (RFC 6890 and its IANA
// registries) that netip has no predicate for and that reach no public host:
// shared address space (carrier NAT, and the tailnets and cloud metadata
// services, 100.100.100.200, that live in it), IETF protocol assignments
// (192.0.0.192 is a cloud's metadata service), benchmarking, "this network"
// and the reserved 240/4, and the documentation blocks (which an operator
// may have put to internal use, as no public host has an address there).
// The local-use NAT64 prefix (RFC 8215) is an operator's own gateway to
// whatever IPv4 addresses it carries, its internal ones included; no public
// host has an address there. (A NAT64 under an operator's own prefix cannot
// be told from a public IPv6 address.) The IETF protocol assignments in
// 2001::/23 are Teredo, benchmarking and other blocks where no receiver lives.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("240.0.0.0/4"), netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("2001::/23"), netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("3fff::/20"),
}

// globalUnicast is the only IPv6 space with public hosts. Outside it lie,
// besides what netip has predicates for, forms that a translator or tunnel
// in the operator's network turns into an IPv4 address, internal ones
// included: IPv4-compatible (::a.b.c.d) and SIIT's ::ffff:0:a.b.c.d.
var globalUnicast = netip.MustParsePrefix("2000::/3")

// Prefixes of IPv6 addresses that carry an IPv4 address a gateway delivers
// to: NAT64 (RFC 6052, the last 32 bits) and 6to4 (RFC 3056, bits 16–47).
var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4 = netip.MustParsePrefix("2002::/16")
)

// publicAddr reports whether ip is an address of the public internet, looking
// through the IPv6 forms that a gateway turns into an IPv4 address.
func publicAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip):
		return publicAddr(netip.AddrFrom4([4]byte(b[12:16])))
	case sixTo4.Contains(ip):
		return publicAddr(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return ip.Is4() || globalUnicast.Contains(ip)
}

// DeliveryStats counts what one run did.
type DeliveryStats struct {
	Delivered int `json:"delivered"`
	Retrying  int `json:"retrying"`
	Failed    int `json:"failed"`
	// More: the run claimed a full batch, so more may be due at once; a
	// deliverer runs again without waiting for its next tick.
	More bool `json:"-"`
}

// Add counts o's messages into s (More is each run's own, and left as is).
func (s *DeliveryStats) Add(o DeliveryStats) {
	s.Delivered += o.Delivered
	s.Retrying += o.Retrying
	s.Failed += o.Failed
}

// claim is one message taken for delivery, with where it goes.
type claim struct {
	msg      *storage.OutboxMessage
	url      string
	secret   string
	previous []string // secrets still signed with after a rotation
	outcome  storage.DeliveryAttempt
	// retryAfter is how long a receiver that answered 429 or 503 asked us
	// to wait (its Retry-After); zero if it did not.
	retryAfter time.Duration
	// until is when the lease ends on this Ledger's wall clock, which its
	// own runs judge it by (msg.LeaseUntil may be on the store's shared clock).
	until time.Time
}

// DeliverNotifications runs one round of the deliverer: it claims the due
// messages (hiding them from other deliverers for the lease), POSTs each to
// its merchant's URL, and records every answer in the delivery log as it
// arrives, scheduling failures again with backoff. Delivery is at least
// once: a crash after a POST and before its record sends it again after the
// lease, with the same event id; recording each answer at once keeps that to
// the POSTs in flight, not the whole batch.
//
// A run waits for all its POSTs, so one receiver that answers slowly holds
// up a run for up to the client's timeout: call it on a schedule without
// waiting for the last run (as kassa serve does). Runs of one Ledger may
// overlap; a run leaves alone the merchants whose claims another run holds.
func (l *Ledger) DeliverNotifications(ctx context.Context, opts DeliveryOptions) (DeliveryStats, error) {
	opts = opts.withDefaults()
	claims, capped, err := l.claimNotifications(ctx, opts)
	if err != nil || len(claims) == 0 {
		return DeliveryStats{}, err
	}
	// Every claim is let go when the run ends, posted or not: a message
	// left unsent keeps its lease, and a later run of this Ledger may take
	// up its merchant again.
	defer l.letGo(claims)
	var (
		mu       sync.Mutex
		stats    = DeliveryStats{More: len(claims) == opts.Batch || capped}
		firstErr error
	)
	record := func(c *claim) {
		if ctx.Err() != nil {
			return // the lease brings unrecorded messages back
		}
		var one DeliveryStats
		err := l.recordDelivery(ctx, opts, c, &one)
		// The POST went out: a store that cannot be reached (a database
		// restarting, which a PostgreSQL store answers store_unavailable
		// after 2 s, having done nothing) is asked again while the lease
		// holds, so an outage shorter than the lease does not send the
		// notification a second time when it ends. So, a few times, is a
		// record of unknown outcome: a COMMIT whose answer a database crash
		// lost, which may or may not have recorded it. Recording again is
		// safe either way: a record already made cleared the claim, and one for a claim
		// that is gone changes nothing. Past the lease another deliverer may
		// have taken the message, and the record would be refused anyway.
		// The outage's pauses leave the unknown outcome its own tries.
		for pause, unknown := recordRetryPause, 0; (fault.Is(err, fault.Unavailable) || fault.IsOutcomeUnknown(err) && unknown < 3) &&
			opts.WallClock().Add(pause).Before(c.until); pause = min(2*pause, time.Second) {
			if fault.IsOutcomeUnknown(err) {
				unknown++
			}
			select {
			case <-ctx.Done():
				return // the lease brings unrecorded messages back
			case <-time.After(pause):
			}
			one = DeliveryStats{}
			err = l.recordDelivery(ctx, opts, c, &one)
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		}
		stats.Add(one)
	}
	// A merchant whose receiver timed out, could not be reached or answered
	// that it is overloaded gets no more POSTs this run: each would wait
	// out the client's timeout while every other merchant's messages waited
	// for the run. Its unsent messages keep their claim and come back when
	// the lease ends, without an attempt counted.
	var unreachable sync.Map
	// postOne makes and records one attempt.
	postOne := func(c *claim) {
		// No caller can recover a panic of this goroutine: unrecovered,
		// it would end the process, a server's API and jobs with it. The
		// panic counts as a failed attempt: left unrecorded, a message
		// whose POST panics every time (a bug that its payload or its
		// receiver triggers) came back after every lease, forever, and
		// never reached the schedule's end. Whether its POST went out is
		// unknown, so it is sent again, as after any failure: delivery is
		// at least once.
		defer func() {
			if p := recover(); p != nil {
				err := fault.Internalf(fmt.Errorf("panic: %v\n%s", p, debug.Stack()),
					"panic delivering notification %s", c.msg.ID)
				c.outcome = storage.DeliveryAttempt{At: opts.WallClock(), Error: internalErrorText}
				recordAfterPanic(record, c)
				mu.Lock()
				defer mu.Unlock()
				if firstErr == nil {
					firstErr = err
				}
			}
		}()
		c.outcome = post(ctx, opts, c)
		// A POST cut short by the run's end says nothing of the receiver.
		slow := ctx.Err() == nil && l.noteReceiver(opts, c)
		if failing(c.outcome) || slow && opts.SkipSlowReceivers {
			unreachable.Store(c.msg.MerchantID, true)
		}
		record(c)
	}
	// A merchant's first claim of the run goes alone, and its others follow
	// once it has answered: posted side by side at once, a receiver that
	// hangs took a POST in flight for each of its claims, and four such
	// receivers with two claims each held all 8 of a run's, while the other
	// merchants' claims (which no other run takes up) waited out the
	// client's timeout behind them. So a receiver that hangs holds one.
	firsts, rest := []*claim{}, map[string][]*claim{}
	for _, c := range claims {
		switch more, seen := rest[c.msg.MerchantID]; {
		case c.url == "":
			c.outcome = storage.DeliveryAttempt{At: opts.WallClock(), Error: "no webhook URL is configured"}
			record(c)
		case seen:
			rest[c.msg.MerchantID] = append(more, c)
		default:
			rest[c.msg.MerchantID] = nil
			firsts = append(firsts, c)
		}
	}
	sem := make(chan struct{}, opts.Parallel)
	var wg sync.WaitGroup
	for _, first := range firsts {
		sem <- struct{}{}
		wg.Go(func() {
			func() {
				defer func() { <-sem }()
				postOne(first)
			}()
			for _, c := range rest[first.msg.MerchantID] {
				sem <- struct{}{}
				if _, skip := unreachable.Load(c.msg.MerchantID); skip {
					<-sem
					continue
				}
				wg.Go(func() {
					defer func() { <-sem }()
					postOne(c)
				})
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return stats, firstErr
	}
	return stats, ctx.Err()
}

// internalErrorText is the error a delivery log shows for an attempt that
// panicked: the panic and its stack are for the operator's log, not for the
// merchant who reads the delivery log.
const internalErrorText = "internal error while delivering"

// recordAfterPanic records a panicked attempt. If the record itself is what
// panicked, it may panic again: that is left unrecorded, and the claim
// brings the message back after the lease, rather than ending the process.
func recordAfterPanic(record func(*claim), c *claim) {
	defer func() { _ = recover() }()
	record(c)
}

// claimNotifications claims the run's batch. capped reports that a merchant
// had more due than a claim takes of one merchant, so more may be due at once.
func (l *Ledger) claimNotifications(ctx context.Context, opts DeliveryOptions) (claims []*claim, capped bool, err error) {
	l.claiming.Lock()
	defer l.claiming.Unlock()
	err = l.store.Update(ctx, func(tx storage.Tx) error {
		claims, capped = nil, false
		now, wall := tx.Now(), opts.WallClock()
		// A window of several batches with a few messages of any one
		// merchant, so that the merchants due in it share the batch, and a
		// merchant's backlog, however large, hides no other merchant's
		// messages behind it.
		due, err := tx.PendingOutbox(now, opts.Batch*claimWindow, opts.perMerchant())
		if err != nil {
			return err
		}
		// Due on the store's clock, but a deliverer's lease holds. One
		// deliverer sets it and another judges it: on a store that replicas
		// share, on the clock they share, as a replica whose own clock runs
		// ahead by more than the lease would take and post a message another
		// is still posting.
		lease := wall
		if sc, ok := tx.(storage.SharedClock); ok && len(due) > 0 {
			// Read only when something is due: runs that find nothing,
			// two a second per replica, make no round trip for it.
			if lease, err = sc.SharedNow(); err != nil {
				return err
			}
		}
		due = slices.DeleteFunc(due, func(m *storage.OutboxMessage) bool { return lease.Before(m.LeaseUntil) })
		// A merchant another run of this Ledger still posts to is left to
		// that run: runs may overlap (kassa serve starts one each second),
		// and without this every run would add POSTs to a slow receiver
		// until all of them waited on it.
		busy := l.busyMerchants(wall, opts.SkipSlowReceivers)
		due = slices.DeleteFunc(due, func(m *storage.OutboxMessage) bool { return busy[m.MerchantID] })
		perMerchant := map[string]int{}
		for _, m := range due {
			if perMerchant[m.MerchantID]++; perMerchant[m.MerchantID] == opts.perMerchant() {
				capped = true
			}
		}
		merchants := map[string]*storage.Merchant{}
		for _, m := range inTurn(due, opts.Batch) {
			mer, ok := merchants[m.MerchantID]
			if !ok {
				if mer, err = tx.GetMerchant(m.MerchantID); err != nil {
					return err
				}
				merchants[m.MerchantID] = mer
			}
			m.Claim = crand.Text()
			m.LeaseUntil = lease.Add(opts.Lease)
			claimed := *m
			m.NextAttempt = now.Add(opts.Lease)
			if err := tx.UpdateOutbox(m); err != nil {
				return err
			}
			c := &claim{msg: &claimed, url: mer.WebhookURL, secret: mer.WebhookSecret, until: wall.Add(opts.Lease)}
			if mer.WebhookPreviousSecret != "" && wallClock().Before(mer.WebhookPreviousUntil) {
				c.previous = []string{mer.WebhookPreviousSecret}
			}
			claims = append(claims, c)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.delivering == nil {
		l.delivering = map[string]*merchantClaims{}
	}
	for _, c := range claims {
		mc := l.delivering[c.msg.MerchantID]
		if mc == nil {
			mc = &merchantClaims{}
			l.delivering[c.msg.MerchantID] = mc
		}
		mc.n++
		if c.until.After(mc.until) {
			mc.until = c.until
		}
	}
	return claims, capped, nil
}

// merchantClaims are a merchant's claims held by this Ledger's runs.
type merchantClaims struct {
	n     int
	until time.Time // the latest of their leases
}

// busyMerchants are the merchants with claims of this Ledger's runs whose
// leases hold at wall. Past its lease a claim no longer keeps a merchant
// busy, as it no longer keeps another replica away: a run stuck on a POST
// (a client without a timeout) must not hold up the merchant for good.
// With skipSlow, the merchants whose receiver was last found slow are busy too.
func (l *Ledger) busyMerchants(wall time.Time, skipSlow bool) map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	busy := make(map[string]bool, len(l.delivering))
	for id, mc := range l.delivering {
		if wall.Before(mc.until) {
			busy[id] = true
		}
	}
	for id, until := range l.slow {
		switch {
		case !wall.Before(until):
			delete(l.slow, id) // so that the map holds only the receivers slow now
		case skipSlow:
			busy[id] = true
		}
	}
	return busy
}

// noteReceiver remembers whether c's receiver was slow or failing (it
// answered after half the client's timeout, or not at all, or with 429 or
// 5xx) and reports it. A prompt answer of any other status clears the mark.
func (l *Ledger) noteReceiver(opts DeliveryOptions, c *claim) bool {
	limit := opts.Client.Timeout / 2
	if limit <= 0 {
		limit = 5 * time.Second // half the default client's timeout
	}
	slow := failing(c.outcome) || time.Duration(c.outcome.DurationMS)*time.Millisecond >= limit
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case slow:
		if l.slow == nil {
			l.slow = map[string]time.Time{}
		}
		l.slow[c.msg.MerchantID] = opts.WallClock().Add(opts.Lease)
	default:
		delete(l.slow, c.msg.MerchantID)
	}
	return slow
}

// failing reports an attempt whose receiver could not be reached, or said
// it is overloaded or failing (429, 5xx).
func failing(a storage.DeliveryAttempt) bool {
	return a.StatusCode == 0 || a.StatusCode == http.StatusTooManyRequests || a.StatusCode >= 500
}

func (l *Ledger) letGo(claims []*claim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range claims {
		if mc := l.delivering[c.msg.MerchantID]; mc != nil {
			if mc.n--; mc.n <= 0 {
				delete(l.delivering, c.msg.MerchantID)
			}
		}
	}
}

// perMerchant is how many due messages of one merchant a claim reads: a
// window then holds at least claimWindow merchants, and a run may still post
// Parallel at once to a single merchant with a backlog.
func (o DeliveryOptions) perMerchant() int { return max(o.Parallel, o.Batch/claimWindow) }

// claimWindow is how many batches of due messages a claim looks at.
const claimWindow = 4

// maxBatch bounds DeliveryOptions.Batch, so that a window of batches stays a
// sane number of messages to read in one transaction.
const maxBatch = 10_000

// inTurn takes up to n of the due messages, one merchant after another in
// turn (each merchant's in due order, merchants in the order of their first
// due message), so that one merchant's backlog does not fill the batch.
func inTurn(due []*storage.OutboxMessage, n int) []*storage.OutboxMessage {
	var order []string
	queues := map[string][]*storage.OutboxMessage{}
	for _, m := range due {
		if _, ok := queues[m.MerchantID]; !ok {
			order = append(order, m.MerchantID)
		}
		queues[m.MerchantID] = append(queues[m.MerchantID], m)
	}
	out := make([]*storage.OutboxMessage, 0, min(n, len(due)))
	for len(out) < n && len(out) < len(due) {
		for _, id := range order {
			if q := queues[id]; len(q) > 0 && len(out) < n {
				out = append(out, q[0])
				queues[id] = q[1:]
			}
		}
	}
	return out
}

// maxErrorText bounds the text of a delivery error a message keeps (as its
// last error and in each log entry): the HTTP client's error quotes what the
// receiver sent (a malformed status line whole, up to the 10 MB header
// limit, four times over when escaped), and a message's 21 copies are stored
// and listed in pages of 1 000.
const maxErrorText = 512

// clipError keeps the beginning (the request, "Post \"URL\":") and the end
// (the cause) of a long error text, cut on rune boundaries.
func clipError(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	head, tail := maxErrorText/2, len(s)-maxErrorText/2+len("…")
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + "…" + s[tail:]
}

// post makes one delivery attempt and describes its outcome.
func post(ctx context.Context, opts DeliveryOptions, c *claim) (out storage.DeliveryAttempt) {
	start := opts.WallClock()
	out = storage.DeliveryAttempt{At: start}
	defer func() { out.Error = clipError(out.Error) }()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.msg.Payload))
	if err != nil {
		out.Error = err.Error()
		return out
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "kassa-notifications/1")
	req.Header.Set(notify.HeaderEventID, c.msg.ID)
	req.Header.Set(notify.HeaderTopic, c.msg.Topic)
	req.Header.Set(notify.HeaderAttempt, strconv.Itoa(c.msg.Attempts+1))
	req.Header.Set(notify.HeaderSignature, notify.Sign(c.secret, start, c.msg.Payload, c.previous...))
	resp, err := opts.Client.Do(req)
	out.DurationMS = opts.WallClock().Sub(start).Milliseconds()
	if err != nil {
		out.Error = deliveryErrorText(err)
		return out
	}
	// Drain a little so the connection can be reused; the body means nothing to us.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	out.StatusCode = resp.StatusCode
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		out.Error = fmt.Sprintf("answered %d", resp.StatusCode)
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		c.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), opts.WallClock())
	}
	return out
}

// parseRetryAfter reads a Retry-After value (RFC 9110: delay seconds, or an
// HTTP date, against the wall clock now, which the receiver's clock is
// compared with); zero when it is absent, malformed or past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		// Past maxRetryAfterSeconds any value is capped anyway; bounding it
		// here keeps the multiplication from overflowing.
		return time.Duration(min(n, maxRetryAfterSeconds)) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return max(t.Sub(now), 0)
}

// maxRetryAfterSeconds bounds a Retry-After in seconds before it is capped
// by the schedule: a year, far above any schedule's longest step.
const maxRetryAfterSeconds = 365 * 24 * 3600

// retryDelay is the wait before retrying after failed attempt n: the
// schedule's, or longer if the receiver asked for longer with Retry-After,
// but never past the schedule's longest step (Retry.Cap), so that a
// receiver cannot push a notification out of the schedule's span.
func retryDelay(opts DeliveryOptions, n int, retryAfter time.Duration) time.Duration {
	return max(opts.Retry.Delay(n, opts.RandN), min(retryAfter, opts.Retry.Cap))
}

// maxLog bounds the delivery log kept per message.
const maxLog = 20

// recordDelivery writes one attempt's outcome, unless another deliverer
// recorded an attempt of the same message since the claim.
func (l *Ledger) recordDelivery(ctx context.Context, opts DeliveryOptions, c *claim, stats *DeliveryStats) error {
	var delivered, failed, retrying bool
	err := l.store.Update(ctx, func(tx storage.Tx) error {
		delivered, failed, retrying = false, false, false
		m, err := tx.GetOutbox(c.msg.MerchantID, c.msg.ID)
		if err != nil {
			return err
		}
		if m.Done() || m.Attempts != c.msg.Attempts || m.Claim != c.msg.Claim {
			return nil
		}
		m.Claim, m.LeaseUntil = "", time.Time{}
		m.Attempts++
		// The wall clock is in the process's zone (TZ); the log is in UTC,
		// as every time kassa stores and shows, whatever zone it ran in.
		at := c.outcome
		at.At = at.At.UTC()
		m.Log = append(m.Log, at)
		if len(m.Log) > maxLog {
			m.Log = m.Log[len(m.Log)-maxLog:]
		}
		m.LastError = c.outcome.Error
		switch {
		case c.outcome.Error == "":
			m.Delivered, delivered = true, true
		case c.url == "" || opts.Retry.GivesUp(m.Attempts):
			m.Failed, failed = true, true
		default:
			m.NextAttempt, retrying = tx.Now().Add(retryDelay(opts, m.Attempts, c.retryAfter)), true
		}
		return tx.UpdateOutbox(m)
	})
	if err != nil {
		return err
	}
	switch {
	case delivered:
		stats.Delivered++
	case failed:
		stats.Failed++
	case retrying:
		stats.Retrying++
	}
	return nil
}

// recordRetryPause is the first pause before a delivery's answer is
// recorded again after the store could not be reached; it doubles to 1 s.
const recordRetryPause = 100 * time.Millisecond
