package server

import (
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/kassahq/kassa/fault"
)

// routeParams are the query parameters one route reads. filters narrow what
// a list holds; lists are the filters taken as csv; the rest (paging, the
// identifiers of payment status, company search) are others.
type routeParams struct {
	filters, lists, others []string
}

// apiQuery is the one table of the query parameters of the API routes
// (those under /v1/ and /sandbox/), by method and pattern; a route not
// listed reads none. A parameter a route does not read is refused rather
// than ignored: a misspelled filter (stauts, storeID) would list every
// order, and an amount sent in the query of a capture would be dropped and
// the whole order captured. The OpenAPI document lists the same names
// (TestQueryTableMatchesOpenAPI).
var apiQuery = map[string]routeParams{
	"GET /v1/orders": {
		filters: []string{"q", "createdFrom", "createdTo", "expiresFrom", "expiresTo"},
		lists:   []string{"id", "storeId", "orderReference", "merchantReference", "status", "statusAnd", "statusNot", "paymentMethodCategory"},
		others:  []string{"cursor", "fromId", "size"},
	},
	"GET /v1/sessions": {
		filters: []string{"q", "createdFrom", "createdTo", "updatedFrom", "updatedTo"},
		lists:   []string{"storeId", "orderId", "merchantReference", "state", "source"},
		others:  []string{"fromId", "size"},
	},
	"GET /v1/settlements": {
		filters: []string{"createdFrom", "createdTo"},
		lists:   []string{"storeId", "id", "reference", "currency"},
		others:  []string{"fromId", "size"},
	},
	"GET /v1/settlements/:settlementId/tx": {others: []string{"fromId", "size"}},
	"GET /v1/notifications":                {others: []string{"fromId", "size"}},
	"GET /v1/paymentstatus":                {others: []string{"orderId", "sessionId"}},
	"GET /v1/headless/search/companies":    {others: []string{"q", "country"}},
}

// queryChecked reports whether the query of pattern is checked against
// apiQuery: the API a merchant's code calls. The pages a buyer's browser
// opens (checkout, documents) are not, as a link followed from an e-mail
// may carry a tracker's parameters, nor the operations routes.
func queryChecked(pattern string) bool {
	return strings.HasPrefix(pattern, "/v1/") || strings.HasPrefix(pattern, "/sandbox/")
}

// check refuses, naming each, a parameter p does not list and a filter sent
// empty: "?storeId=" is what a script sends when its variable is unset,
// and read as no filter it listed every store. A paging parameter may be
// empty (the first page, the default size), as a loop's first request
// sends it. raw has been checked to decode (checkQuery).
func (p routeParams) check(raw string) error {
	if raw == "" {
		return nil
	}
	v, err := url.ParseQuery(raw)
	if err != nil {
		return nil // checkQuery has answered
	}
	var f fault.Fields
	for _, name := range slices.Sorted(maps.Keys(v)) {
		vs := v[name]
		switch {
		case slices.Contains(p.filters, name):
			for _, s := range vs {
				if strings.TrimSpace(s) == "" {
					f.Add(name, "is empty; leave the parameter out to not filter on it")
					break
				}
			}
		case slices.Contains(p.lists, name):
			for _, s := range vs {
				if len(queryList([]string{s})) == 0 {
					f.Add(name, "is empty; leave the parameter out to not filter on it")
					break
				}
			}
		case slices.Contains(p.others, name):
		case name == "":
			f.Add(name, "a parameter without a name is given")
		default:
			f.Add(name, "is not a parameter of this operation")
		}
	}
	return f.Err()
}
