package server

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa/company"
	"github.com/kassahq/kassa/fault"
)

// CompanySearchResponse is the spec's CompanySearchResponse.
type CompanySearchResponse struct {
	Country   string          `json:"country"`
	Companies []company.Match `json:"companies"`
}

// Company search limits: results per query and query length.
const (
	companySearchLimit = 20
	maxCompanyQuery    = 100
)

func (s *Server) searchCompanies(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if wait := s.limiter.take(s.clientAddr(r), time.Now()); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(wait))
		s.writeError(w, r, fault.New(fault.RateLimited, "rate_limited", "too many company searches from this address; retry after %d s", wait))
		return
	}
	v := r.URL.Query()
	var f fault.Fields
	q := strings.TrimSpace(queryValue(&f, v, "q"))
	country := queryValue(&f, v, "country")
	switch {
	case country == "":
		f.Add("country", "is required")
	case !s.cfg.Companies.Has(country):
		f.Add("country", "must be one of %v", s.cfg.Companies.Countries())
	}
	switch {
	case q == "":
		f.Add("q", "is required")
	case utf8.RuneCountInString(q) > maxCompanyQuery:
		f.Add("q", "must be at most %d characters", maxCompanyQuery)
	}
	// A query written as a whole number that is none (a check digit or a
	// VAT suffix wrong) would otherwise be searched as a name and find
	// nothing, which reads as "no such company" rather than "mistyped".
	// Numbers still being typed are not refused, nor listed ones (the
	// sandbox buyers' numbers are made up).
	if f.Err() == nil {
		if n, whole := company.ParseNumber(country, q); whole && (n == "" || !company.ValidNumber(country, n)) {
			if _, listed := s.cfg.Companies.Lookup(country, q); !listed {
				f.Add("q", "is not a valid %s registration number: expected %s", country, company.NumberForms(country))
			}
		}
	}
	if err := f.Err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	res := CompanySearchResponse{Country: country, Companies: s.cfg.Companies.Search(country, q, companySearchLimit)}
	if res.Companies == nil {
		res.Companies = []company.Match{}
	}
	writeJSON(w, http.StatusOK, res)
}

// clientAddr is what rate limits are kept by: the client's IPv4 address,
// or the /64 network of an IPv6 one. A host is routinely given a whole /64
// and may send each request from another address in it, so a limit per IPv6
// address would limit nothing. The client is the peer, or, when the peer is
// a trusted proxy, the last address of X-Forwarded-For that is not one: the
// addresses before it are the client's own say and may be forged.
func (s *Server) clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = plainAddr(a)
	if s.trusted(a) {
		a = s.forwardedFor(r, a)
	}
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

// forwardedFor walks the X-Forwarded-For addresses of r from the last (the
// one the trusted peer added) back past the trusted proxies, and answers the
// first that is not one; peer when there is none, or an entry does not parse
// (a proxy that does not keep the header's form cannot be followed further).
// It reads only the entries it walks: the ones before are the client's own,
// and may fill the header's whole size (every request pays this walk before
// its rate limit is looked at).
func (s *Server) forwardedFor(r *http.Request, peer netip.Addr) netip.Addr {
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		rest := hops[i]
		for {
			j := strings.LastIndexByte(rest, ',')
			a, err := netip.ParseAddr(strings.TrimSpace(rest[j+1:]))
			if err != nil {
				return peer
			}
			if a = plainAddr(a); !s.trusted(a) {
				return a
			}
			peer = a
			if j < 0 {
				break
			}
			rest = rest[:j]
		}
	}
	return peer
}

// plainAddr is a without IPv4 mapping or zone: a proxy reached over a
// link-local address is the peer with its zone (fe80::1%eth0), which no
// network contains.
func plainAddr(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// trusted reports whether a (a plainAddr) is a trusted proxy's. A network
// written IPv4-mapped (::ffff:10.0.0.0/104) holds the IPv4 addresses it
// maps, which it does not contain in their plain form.
func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) || (a.Is4() && p.Addr().Is4In6() && p.Contains(netip.AddrFrom16(a.As16()))) {
			return true
		}
	}
	return false
}

// minSweep is the number of client buckets below which none are dropped.
const minSweep = 100_000

// rateLimiter is a token bucket per client address.
type rateLimiter struct {
	mu      sync.Mutex
	rate    float64 // tokens per second
	burst   float64
	buckets map[string]*bucket
	// sweepAt is the number of buckets at which a new client next drops the
	// idle ones. It doubles past what a sweep leaves, so that clients that
	// are all active (many addresses within seconds) cost a sweep now and
	// then, not a scan of every bucket per request under the lock.
	sweepAt int
	sweeps  int // sweeps done, for tests
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newRateLimiter(perSecond, burst float64) *rateLimiter {
	return &rateLimiter{rate: perSecond, burst: burst, buckets: map[string]*bucket{}, sweepAt: minSweep}
}

// allow reports whether key may search now, taking a token if so.
func (l *rateLimiter) allow(key string, now time.Time) bool { return l.take(key, now) == 0 }

// take takes a token of key's bucket and answers 0, or, with none left, in
// how many whole seconds (at least 1, rounded up) the bucket holds one
// again: the refusal's Retry-After. Below one search a second that is more
// than a second, and a client that came back after one would be refused
// again.
func (l *rateLimiter) take(key string, now time.Time) (retryAfter int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= l.sweepAt {
			l.sweep(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	b.tokens += now.Sub(b.last).Seconds() * l.rate
	if b.tokens > l.burst {
		b.tokens = l.burst
	}
	b.last = now
	if b.tokens < 1 {
		// Capped at a day: at an absurdly small rate the seconds would
		// overflow an int, and no client waits longer anyway.
		return int(max(1, min(math.Ceil((1-b.tokens)/l.rate), 86400)))
	}
	b.tokens--
	return 0
}

// sweep drops the buckets that have filled up again: a new bucket starts
// full, so forgetting them changes no answer.
func (l *rateLimiter) sweep(now time.Time) {
	l.sweeps++
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.buckets, k)
		}
	}
	l.sweepAt = max(minSweep, 2*len(l.buckets))
}
