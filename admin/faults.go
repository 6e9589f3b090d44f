package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/faults"
)

// Faults on demand in the admin API, so a test suite in any language drives
// them with HTTP alone:
//
//	GET    /v1/faults                        the active faults and the held marker requests
//	POST   /v1/faults                        add one (body: faults.Spec), 201 with it
//	DELETE /v1/faults                        end every fault, forget held marker copies
//	DELETE /v1/faults/{id}                   end one (a paused node resumes, held markers go)
//	POST   /v1/faults/markers/{id}/replay    send a held marker request again (a late marker)
//
// The node serves them when its Backend also implements FaultsBackend with
// a non-nil set; otherwise they answer 404 saying so. With --secure they
// need the admin token, as every /v1 path does.

// FaultsBackend is a Backend whose process takes faults on demand.
type FaultsBackend interface {
	FaultSet() *faults.Set
}

var errNoFaults = errors.New("this node takes no faults on demand")

// maxFaultBody bounds a POST /v1/faults body.
const maxFaultBody = 64 << 10

func faultRoutes(mux *http.ServeMux, b Backend) {
	var set *faults.Set
	if fb, ok := b.(FaultsBackend); ok {
		set = fb.FaultSet()
	}
	faultRoutesOf(mux, set)
}

// faultRoutesOf serves set's routes (nil: 404 saying so).
func faultRoutesOf(mux *http.ServeMux, set *faults.Set) {
	serve := servedIf(set != nil, errNoFaults)
	mux.HandleFunc("GET /v1/faults", serve(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, set.List())
	}))
	mux.HandleFunc("POST /v1/faults", serve(func(w http.ResponseWriter, r *http.Request) {
		var sp faults.Spec
		dec := json.NewDecoder(io.LimitReader(r.Body, maxFaultBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sp); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("body: want a JSON object {\"kind\", \"node\", \"api_key\", \"error_code\", \"delay\", \"count\", \"for\"}: %v", err))
			return
		}
		f, err := set.Add(sp)
		if err != nil {
			writeFaultError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, f)
	}))
	mux.HandleFunc("DELETE /v1/faults", serve(func(w http.ResponseWriter, r *http.Request) {
		set.Clear()
		writeJSON(w, http.StatusOK, set.List())
	}))
	mux.HandleFunc("DELETE /v1/faults/{id}", serve(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("fault id %q: want a number", r.PathValue("id")))
			return
		}
		if err := set.Remove(id); err != nil {
			writeFaultError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, set.List())
	}))
	mux.HandleFunc("POST /v1/faults/markers/{id}/replay", serve(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("marker id %q: want a number", r.PathValue("id")))
			return
		}
		res, err := set.Replay(r.Context(), id)
		if err != nil {
			writeFaultError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}))
}

// StartFaults listens on addr and serves only set's faults, /metrics from
// gatherer and /healthz: the admin listener of a process whose node has
// no admin backend (`txncoord leader`), so that a test can kill, restart
// or pause that node over HTTP. Every other path answers 404 saying so.
func StartFaults(addr string, set *faults.Set, gatherer prometheus.Gatherer, auth Auth, log zerolog.Logger) (*Server, error) {
	mux := http.NewServeMux()
	faultRoutesOf(mux, set)
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("no such endpoint: %s %s (this process serves only /v1/faults, /metrics and /healthz)", r.Method, r.URL.Path))
	})
	return listenAndServe(addr, mux, auth, log)
}

func writeFaultError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, faults.ErrBadSpec):
		writeError(w, http.StatusBadRequest, err)
	case errors.Is(err, faults.ErrNotFound):
		writeError(w, http.StatusNotFound, err)
	default:
		writeError(w, http.StatusBadGateway, err)
	}
}

// Faults lists the active faults and held marker requests.
func (c *Client) Faults(ctx context.Context) (faults.List, error) {
	var out faults.List
	return out, c.do(ctx, http.MethodGet, "/v1/faults", &out)
}

// AddFault injects a fault.
func (c *Client) AddFault(ctx context.Context, sp faults.Spec) (faults.Fault, error) {
	var out faults.Fault
	return out, c.doJSON(ctx, http.MethodPost, "/v1/faults", sp, &out)
}

// RemoveFault ends one fault (id > 0) or every fault (id 0).
func (c *Client) RemoveFault(ctx context.Context, id uint64) (faults.List, error) {
	path := "/v1/faults"
	if id > 0 {
		path += "/" + strconv.FormatUint(id, 10)
	}
	var out faults.List
	return out, c.do(ctx, http.MethodDelete, path, &out)
}

// ReplayMarker sends held marker request id to its leader again.
func (c *Client) ReplayMarker(ctx context.Context, id uint64) (faults.ReplayResult, error) {
	var out faults.ReplayResult
	return out, c.do(ctx, http.MethodPost, "/v1/faults/markers/"+strconv.FormatUint(id, 10)+"/replay", &out)
}
