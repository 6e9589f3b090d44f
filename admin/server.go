package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/console"
	"github.com/txncoord/txncoord/security"
)

// timeouts bound every connection: a slow or idle client cannot hold one
// open for good. WriteTimeout also bounds /debug/pprof/profile and trace:
// their ?seconds= must stay below it (pprof refuses longer ones).
var timeouts = struct{ readHeader, read, write, idle time.Duration }{
	readHeader: 10 * time.Second,
	read:       30 * time.Second,
	write:      2 * time.Minute,
	idle:       2 * time.Minute,
}

// Server serves the admin API.
type Server struct {
	srv *http.Server
	ln  net.Listener
	log zerolog.Logger
	// gatherer and routes serve the current backend: Rebind replaces
	// them when the node behind the API is started again.
	gatherer prometheus.Gatherer
	routes   atomic.Pointer[http.Handler]
	// down, while set, is why the node behind the API is not running:
	// only what lives beside it (Survives) is served, the rest is 503.
	down atomic.Pointer[error]
}

// Auth protects the API with a bearer token; Open lists paths served
// without it (/metrics, /healthz, /readyz when metrics are left open).
// The console's files (console.Paths) are always served without it: they
// hold no data, and the page asks for the token before it reads the API.
type Auth struct {
	Token string
	Open  []string
}

// Start listens on addr and serves the admin API and the console for b.
// gatherer serves /metrics (nil: prometheus.DefaultGatherer).
func Start(addr string, b Backend, gatherer prometheus.Gatherer, auth Auth, log zerolog.Logger) (*Server, error) {
	if gatherer == nil {
		gatherer = prometheus.DefaultGatherer
	}
	s := &Server{gatherer: gatherer}
	s.Rebind(b)
	return s.listen(addr, http.HandlerFunc(s.serve), auth, log)
}

// listenAndServe serves h on addr behind auth.
func listenAndServe(addr string, h http.Handler, auth Auth, log zerolog.Logger) (*Server, error) {
	return (&Server{}).listen(addr, h, auth, log)
}

func (s *Server) listen(addr string, h http.Handler, auth Auth, log zerolog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin: listen %s: %w", addr, err)
	}
	s.ln, s.log = ln, log
	s.srv = &http.Server{
		Handler:           security.RequireBearer(auth.Token, append(console.Paths(), auth.Open...), h),
		ReadHeaderTimeout: timeouts.readHeader,
		ReadTimeout:       timeouts.read,
		WriteTimeout:      timeouts.write,
		IdleTimeout:       timeouts.idle,
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("admin server stopped")
		}
	}()
	return s, nil
}

// Addr is the listening address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// URL is the base URL of the API.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Rebind serves b from now on (the node behind the API started again:
// a new backend over its reopened state). Not for a StartFaults server.
func (s *Server) Rebind(b Backend) {
	h := Handler(b, s.gatherer)
	s.routes.Store(&h)
}

// Down says the node behind the API is not running (why), or running
// again (nil). While it is down the listener keeps answering: the faults
// (so a test ends the fault that stopped the node), /metrics, /healthz,
// profiles and the console's files are served; every other path answers
// 503 with why, as JSON.
func (s *Server) Down(why error) {
	if why == nil {
		s.down.Store(nil)
		return
	}
	s.down.Store(&why)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if why := s.down.Load(); why != nil && !Survives(r.URL.Path) {
		writeError(w, http.StatusServiceUnavailable, *why)
		return
	}
	(*s.routes.Load()).ServeHTTP(w, r)
}

// Survives reports whether path is served while the node behind the API
// is down: what the process answers without it.
func Survives(path string) bool {
	if path == "/v1/faults" || strings.HasPrefix(path, "/v1/faults/") || strings.HasPrefix(path, "/debug/pprof/") {
		return true
	}
	switch path {
	case "/metrics", "/healthz":
		return true
	}
	return slices.Contains(console.Paths(), path)
}

// Shutdown stops the server gracefully.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// Handler returns the admin API's routes and the console at GET /.
func Handler(b Backend, gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/transactions", func(w http.ResponseWriter, r *http.Request) {
		tq, err := parseTxnQuery(r.URL.Query())
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		f := ListFilter{State: r.URL.Query().Get("state")}
		if tq.states != nil {
			f.State = "" // several: filtered here
		}
		if d := r.URL.Query().Get("duration_filter"); d != "" {
			dur, err := time.ParseDuration(d)
			if err != nil || dur < 0 {
				writeError(w, http.StatusBadRequest, fmt.Errorf("duration_filter %q: want a duration such as 30s or 5m", d))
				return
			}
			f.MinDuration = dur
		}
		if f.State != "" && !validState(f.State) {
			writeError(w, http.StatusBadRequest, fmt.Errorf("state %q: want one of %v", f.State, States))
			return
		}
		if pager, ok := b.(TxnPager); ok && tq.paged() && f.MinDuration == 0 {
			writeJSON(w, http.StatusOK, nonNil(tq.pageWith(w, pager, f)))
			return
		}
		txns := b.Transactions(f)
		if tq.paged() {
			txns = tq.apply(w, txns)
		}
		writeJSON(w, http.StatusOK, nonNil(txns))
	})
	mux.HandleFunc("GET /v1/transactions/{id}", func(w http.ResponseWriter, r *http.Request) {
		t, err := b.Transaction(r.PathValue("id"))
		if err != nil {
			writeBackendError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, t)
	})
	mux.HandleFunc("POST /v1/transactions/{id}/abort", func(w http.ResponseWriter, r *http.Request) {
		force := false
		if f := r.URL.Query().Get("force"); f != "" {
			v, err := strconv.ParseBool(f)
			if err != nil {
				writeError(w, http.StatusBadRequest, fmt.Errorf("force %q: want true or false", f))
				return
			}
			force = v
		}
		t, err := b.Abort(r.Context(), r.PathValue("id"), force)
		if err != nil {
			writeBackendError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, t)
	})
	mux.HandleFunc("POST /v1/transactions/{id}/retry-markers", func(w http.ResponseWriter, r *http.Request) {
		t, err := b.RetryMarkers(r.PathValue("id"))
		if err != nil {
			writeBackendError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, t)
	})
	mux.HandleFunc("GET /v1/leaders", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, nonNil(b.Leaders()))
	})
	mux.HandleFunc("GET /v1/markers", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, nonNil(b.Markers()))
	})
	groupRoutes(mux, b)
	topicRoutes(mux, b)
	recordRoutes(mux, b)
	aclRoutes(mux, b)
	coordinatorRoutes(mux, b)
	faultRoutes(mux, b)
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	// Profiles for performance work (go tool pprof URL/debug/pprof/profile);
	// behind the admin token like the rest of the API.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := b.Ready(); err != nil {
			writeError(w, http.StatusServiceUnavailable, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.Handle("GET /{$}", console.Handler())
	mux.Handle("GET "+console.Prefix, console.Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowedMethods(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		writeError(w, http.StatusNotFound, fmt.Errorf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// allowedMethods lists the methods mux serves r's path with, other than
// through the catch-all "/": a known path asked with the wrong method is
// answered 405 with them in Allow, an unknown path 404.
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	return allow
}

// States are the transaction state names, as Kafka names them.
var States = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func validState(s string) bool {
	for _, x := range States {
		if x == s {
			return true
		}
	}
	return false
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ErrorBody is the JSON body of every error answer.
type ErrorBody struct {
	Error string `json:"error"`
}

func writeBackendError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrGroupNotFound):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, ErrConflict):
		writeError(w, http.StatusConflict, err)
	default:
		writeError(w, http.StatusInternalServerError, err)
	}
}

// servedIf wraps the handlers of an optional backend (groups, topics):
// where the node has none (ok false), each answers 404 with missing.
func servedIf(ok bool, missing error) func(http.HandlerFunc) http.HandlerFunc {
	return func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if !ok {
				writeError(w, http.StatusNotFound, missing)
				return
			}
			h(w, r)
		}
	}
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, ErrorBody{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
