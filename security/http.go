package security

import (
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"
)

// RequireBearer guards an HTTP handler (the admin API) with a bearer
// token: a request without "Authorization: Bearer <token>" gets 401 with a
// WWW-Authenticate header. The scheme is matched without regard to case
// (RFC 9110 §11.1: "bearer" is Bearer); the token exactly, in constant
// time. Paths in open (e.g. "/metrics", "/healthz", "/readyz") stay open.
// An empty token disables the check.
func RequireBearer(token string, open []string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(open, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		scheme, got, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="txncoord"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"missing or invalid bearer token"}` + "\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
