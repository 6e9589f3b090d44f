package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// files is static/ as served: index.html at "/", the others under
// /console/.
var files, _ = fs.Sub(static, "static")

// Prefix is where the console's assets are served.
const Prefix = "/console/"

// Paths lists every path the console serves ("/" and each asset). The
// admin server leaves exactly these open without its token: they are the
// same files for everyone and hold no data.
func Paths() []string {
	out := []string{"/"}
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		if !e.IsDir() && e.Name() != "index.html" {
			out = append(out, Prefix+e.Name())
		}
	}
	return out
}

// Handler serves the console: GET / the page, GET /console/{file} its
// assets. Other paths answer 404.
func Handler() http.Handler {
	assets := http.StripPrefix(Prefix, http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The page must not be framed by another site (clickjacking of
		// the Abort button) nor run scripts from anywhere else.
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		w.Header().Set("Cache-Control", "no-cache")
		switch {
		case r.URL.Path == "/":
			http.ServeFileFS(w, r, files, "index.html")
		case len(r.URL.Path) > len(Prefix) && strings.HasPrefix(r.URL.Path, Prefix) && path.Base(r.URL.Path) != "index.html":
			assets.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}
