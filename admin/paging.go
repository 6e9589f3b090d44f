package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Paging and filtering of GET /v1/transactions and of a topic's partitions
// on the server, so a client with 10,000 transactions or 1,000 partitions
// (the console) fetches one page at a time. All of it is an addition: a
// request without these parameters gets what it always got.
//
//	GET /v1/transactions?state=S[,S...]&id=PATTERN&coordinator=N&offset=O&limit=L
//	GET /v1/topics/{name}?offset=O&limit=L           partition_info's page
//	GET /v1/topics/{name}/offsets?offset=O&limit=L   by partition, from O
//
// The answer stays a JSON array (an object for a topic); a paged list says
// in headers how many matched in all (X-Total-Count) and, for
// transactions, how many of them are in each state (X-State-Counts, a JSON
// object), so a page can show the totals without fetching the rest.

// page is an offset and a limit (0: no limit).
type page struct{ offset, limit int }

// parsePage reads offset and limit; a bad one is an error naming it.
func parsePage(q url.Values) (page, error) {
	var p page
	for _, f := range []struct {
		name string
		to   *int
	}{{"offset", &p.offset}, {"limit", &p.limit}} {
		v := q.Get(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return page{}, fmt.Errorf("%s %q: want a number 0 or more", f.name, v)
		}
		*f.to = n
	}
	return p, nil
}

// bounds are the page's [start, end) in a list of n.
func (p page) bounds(n int) (int, int) {
	start := min(p.offset, n)
	end := n
	if p.limit > 0 {
		end = min(start+p.limit, n)
	}
	return start, end
}

// IDPattern matches a transactional id as the console's filter does: a
// glob with * and ? matches the whole id, anything else is a substring;
// both ignore case.
func IDPattern(pattern string) *regexp.Regexp {
	if strings.ContainsAny(pattern, "*?") {
		esc := regexp.QuoteMeta(pattern)
		esc = strings.ReplaceAll(strings.ReplaceAll(esc, `\*`, ".*"), `\?`, ".")
		return regexp.MustCompile("(?i)^" + esc + "$")
	}
	return regexp.MustCompile("(?i)" + regexp.QuoteMeta(pattern))
}

// TxnPager is a Backend that answers a page of transactions itself,
// describing only the page's (with 10,000 transactions, 50 instead of
// all); the handler uses it when no duration filter is asked.
type TxnPager interface {
	TransactionsPage(TxnPageQuery) TxnPage
}

// TxnPageQuery selects a page: States (nil: any), ID, Coordinator (nil:
// any), from Offset, at most Limit (0: no limit), by transactional id.
type TxnPageQuery struct {
	States        []string
	ID            *regexp.Regexp
	Coordinator   *int32
	Offset, Limit int
}

// Bounds are the page's [start, end) among n matches.
func (q TxnPageQuery) Bounds(n int) (int, int) { return page{q.Offset, q.Limit}.bounds(n) }

// TxnPage is a page of transactions with the totals of every match.
type TxnPage struct {
	Txns   []Txn
	Total  int
	Counts map[string]int // matches by state
}

// txnQuery is what GET /v1/transactions selects beyond ListFilter.
type txnQuery struct {
	states      map[string]bool // nil: any
	id          *regexp.Regexp
	coordinator *int32
	page        page
}

func parseTxnQuery(q url.Values) (txnQuery, error) {
	var tq txnQuery
	if s := q.Get("state"); strings.Contains(s, ",") {
		tq.states = map[string]bool{}
		for _, st := range strings.Split(s, ",") {
			if !validState(st) {
				return tq, fmt.Errorf("state %q: want one of %v, or several separated by commas", st, States)
			}
			tq.states[st] = true
		}
	}
	if id := q.Get("id"); id != "" {
		tq.id = IDPattern(id)
	}
	if c := q.Get("coordinator"); c != "" {
		n, err := strconv.ParseInt(c, 10, 32)
		if err != nil {
			return tq, fmt.Errorf("coordinator %q: want a node id", c)
		}
		node := int32(n)
		tq.coordinator = &node
	}
	var err error
	tq.page, err = parsePage(q)
	return tq, err
}

// paged reports whether the query asks for anything beyond ListFilter.
func (tq txnQuery) paged() bool {
	return tq.states != nil || tq.id != nil || tq.coordinator != nil || tq.page != (page{})
}

// pageWith asks pager for the page (f without a duration filter).
func (tq txnQuery) pageWith(w http.ResponseWriter, pager TxnPager, f ListFilter) []Txn {
	q := TxnPageQuery{ID: tq.id, Coordinator: tq.coordinator, Offset: tq.page.offset, Limit: tq.page.limit}
	for st := range tq.states {
		q.States = append(q.States, st)
	}
	if tq.states == nil && f.State != "" {
		q.States = []string{f.State}
	}
	p := pager.TransactionsPage(q)
	writeTotals(w, p.Total, p.Counts)
	return p.Txns
}

func writeTotals(w http.ResponseWriter, total int, counts map[string]int) {
	if counts == nil {
		counts = map[string]int{}
	}
	raw, _ := json.Marshal(counts)
	w.Header().Set("X-Total-Count", strconv.Itoa(total))
	w.Header().Set("X-State-Counts", string(raw))
}

// apply filters txns (sorted by id, as Backend lists them), writes the
// totals' headers and returns the page.
func (tq txnQuery) apply(w http.ResponseWriter, txns []Txn) []Txn {
	slices.SortFunc(txns, func(a, b Txn) int { return strings.Compare(a.TransactionalID, b.TransactionalID) })
	matched := txns[:0:0]
	counts := map[string]int{}
	for _, t := range txns {
		if (tq.states == nil || tq.states[t.State]) && (tq.id == nil || tq.id.MatchString(t.TransactionalID)) &&
			(tq.coordinator == nil || *tq.coordinator == t.CoordinatorID) {
			matched = append(matched, t)
			counts[t.State]++
		}
	}
	writeTotals(w, len(matched), counts)
	start, end := tq.page.bounds(len(matched))
	return matched[start:end]
}

// pageOf is the page of list asked for by q's offset and limit, with
// X-Total-Count; the whole list when q asks for no page.
func pageOf[T any](w http.ResponseWriter, q url.Values, list []T) ([]T, error) {
	p, err := parsePage(q)
	if err != nil || p == (page{}) {
		return list, err
	}
	w.Header().Set("X-Total-Count", strconv.Itoa(len(list)))
	start, end := p.bounds(len(list))
	return list[start:end], nil
}
