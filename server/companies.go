package server

import (
	"net"
	"net/http"
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
	if !s.limiter.allow(clientAddr(r), time.Now()) {
		w.Header().Set("Retry-After", "1")
		s.writeError(w, r, fault.New(fault.RateLimited, "rate_limited", "too many company searches from this address; retry after a second"))
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

// clientAddr is the remote IP (without port) that rate limits are kept by.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// rateLimiter is a token bucket per client address.
type rateLimiter struct {
	mu      sync.Mutex
	rate    float64 // tokens per second
	burst   float64
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newRateLimiter(perSecond, burst float64) *rateLimiter {
	return &rateLimiter{rate: perSecond, burst: burst, buckets: map[string]*bucket{}}
}

func (l *rateLimiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) > 100_000 {
			// Forget idle clients rather than grow without bound.
			for k, v := range l.buckets {
				if now.Sub(v.last) > time.Minute {
					delete(l.buckets, k)
				}
			}
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
		return false
	}
	b.tokens--
	return true
}
