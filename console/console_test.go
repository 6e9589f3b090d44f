package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestHandlerServesEmbeddedFiles: GET / is the page, each asset is served
// under /console/ with its type and the page's security headers, and
// nothing else is: no directory listing, no index.html twice, no other
// path.
func TestHandlerServesEmbeddedFiles(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	cases := []struct {
		path        string
		status      int
		contentType string
		body        string
	}{
		{"/", 200, "text/html", `<script src="/console/app.js"`},
		{"/console/app.js", 200, "text/javascript", "function h(tag"},
		{"/console/app.css", 200, "text/css", "table {"},
		{"/console/", 404, "", ""},
		{"/console/index.html", 404, "", ""},
		{"/console/missing.js", 404, "", ""},
		{"/v1/transactions", 404, "", ""},
	}
	for _, tc := range cases {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: %d, want %d", tc.path, resp.StatusCode, tc.status)
			continue
		}
		if tc.status != 200 {
			continue
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.contentType) {
			t.Errorf("GET %s: Content-Type %q, want %s", tc.path, ct, tc.contentType)
		}
		if !strings.Contains(string(body), tc.body) {
			t.Errorf("GET %s: body lacks %q", tc.path, tc.body)
		}
		if resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET %s: headers %v lack the frame and script policy", tc.path, resp.Header)
		}
	}
}

// TestPathsAreWhatIsServed: the paths the admin server leaves open are
// exactly the files served, and the page loads nothing from elsewhere.
func TestPathsAreWhatIsServed(t *testing.T) {
	paths := Paths()
	slices.Sort(paths)
	want := []string{"/", "/console/app.css", "/console/app.js"}
	if !slices.Equal(paths, want) {
		t.Fatalf("Paths() = %v, want %v", paths, want)
	}
	for _, name := range []string{"index.html", "app.js", "app.css"} {
		raw, err := files.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := io.ReadAll(raw)
		raw.Close()
		// The SVG namespace is a name, not a fetch.
		rest := strings.ReplaceAll(string(text), "'http://www.w3.org/2000/svg'", "")
		if strings.Contains(rest, "http://") || strings.Contains(rest, "https://") {
			t.Errorf("%s refers to another site: the console must work with no network", name)
		}
	}
}
