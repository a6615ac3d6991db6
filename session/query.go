package session

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kassahq/kassa/fault"
)

// Query selects sessions of a merchant for GET /v1/sessions. All given
// filters must hold; within a list any value may match.
type Query struct {
	Q                  string // case-insensitive substring of id, merchantReference, externalSessionId or orderId
	FromID             string // start after this session (newest first)
	StoreIDs           []string
	OrderIDs           []string
	MerchantReferences []string
	States             []State
	Sources            []Source
	CreatedFrom        time.Time // inclusive
	CreatedTo          time.Time // exclusive
	UpdatedFrom        time.Time // inclusive
	UpdatedTo          time.Time // exclusive
	Size               int
	// PageBytes lowers the page's budget of stored session bytes below
	// storage.MaxPageBytes (storage.SessionPageBudget). It is a hook for
	// tests, which cannot build 16 MiB of sessions per page; no request
	// sets it.
	PageBytes int
}

// Validate checks enums and bounds, naming every bad parameter, and applies
// the default size.
func (q *Query) Validate() error {
	var f fault.Fields
	for _, s := range q.States {
		if !slices.Contains(states, s) {
			f.Add("state", "unknown state %q; one of %v", s, states)
		}
	}
	for _, s := range q.Sources {
		if !slices.Contains(sources, s) {
			f.Add("source", "unknown source %q; one of %v", s, sources)
		}
	}
	switch {
	case q.Size == 0:
		q.Size = defaultPageSize
	case q.Size < 1 || q.Size > maxPageSize:
		f.Add("size", "must be between 1 and %d", maxPageSize)
	}
	// Characters, as every text bound counts them (order.CheckText), not
	// bytes: "å" is two bytes in UTF-8.
	if utf8.RuneCountInString(q.Q) > 200 {
		f.Add("q", "must be at most 200 characters")
	}
	return f.Err()
}

func anyOf[T comparable](want []T, v T) bool { return len(want) == 0 || slices.Contains(want, v) }

// Match reports whether s (with its state at now) satisfies q.
func (q *Query) Match(s *Session, now time.Time) bool {
	switch {
	case !anyOf(q.StoreIDs, s.StoreID), !anyOf(q.OrderIDs, s.OrderID),
		!anyOf(q.MerchantReferences, s.MerchantReference), !anyOf(q.States, s.StateAt(now)),
		!anyOf(q.Sources, s.Source):
		return false
	case !q.CreatedFrom.IsZero() && s.CreatedAt.Before(q.CreatedFrom), !q.CreatedTo.IsZero() && !s.CreatedAt.Before(q.CreatedTo),
		!q.UpdatedFrom.IsZero() && s.UpdatedAt.Before(q.UpdatedFrom), !q.UpdatedTo.IsZero() && !s.UpdatedAt.Before(q.UpdatedTo):
		return false
	}
	if q.Q != "" {
		// Field by field, so that q cannot match across two of them; text no
		// store holds (NUL, invalid UTF-8) matches nothing.
		if !utf8.ValidString(q.Q) {
			return false
		}
		needle := strings.ToLower(q.Q)
		for _, f := range [...]string{s.ID, s.MerchantReference, s.ExternalSessionID, s.OrderID} {
			if strings.Contains(strings.ToLower(f), needle) {
				return true
			}
		}
		return false
	}
	return true
}

// Page selects one page of sessions from all of a merchant's sessions
// (sorted newest first by the caller): those after FromID that match, up to
// Size and, when take is given, while take puts each on the page (a store's
// byte budget: storage.PageFill, which takes any session onto an empty page).
// next is the id to pass as fromId for the following page, or "".
func (q *Query) Page(sorted []*Session, now time.Time, take func(s *Session) bool) (page []*Session, next string) {
	start := 0
	if q.FromID != "" {
		start = len(sorted)
		for i, s := range sorted {
			if s.ID == q.FromID {
				start = i + 1
				break
			}
		}
	}
	for _, s := range sorted[start:] {
		if !q.Match(s, now) {
			continue
		}
		if len(page) == q.Size || take != nil && !take(s) {
			return page, page[len(page)-1].ID
		}
		page = append(page, s)
	}
	return page, ""
}
