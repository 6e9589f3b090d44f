package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/txncoord/txncoord/markersender"
)

// Client calls the admin API, retrying with backoff on connection errors
// and 5xx answers (go-retryablehttp's default policy).
type Client struct {
	base string
	http *retryablehttp.Client
}

// NewClient returns a client of the admin API at base (http://host:port).
func NewClient(base string) *Client { return NewClientWithToken(base, "") }

// NewClientWithToken is NewClient sending "Authorization: Bearer token".
func NewClientWithToken(base, token string) *Client {
	rc := retryablehttp.NewClient()
	rc.Logger = nil
	rc.RetryMax = 3
	rc.RetryWaitMin = 100 * time.Millisecond
	rc.RetryWaitMax = 1 * time.Second
	rc.HTTPClient.Timeout = 30 * time.Second
	// Keep the last answer (a 5xx JSON error) instead of a generic
	// "giving up" error, so the user sees the server's message.
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	if token != "" {
		rc.RequestLogHook = func(_ retryablehttp.Logger, r *http.Request, _ int) {
			r.Header.Set("Authorization", "Bearer "+token)
		}
	}
	return &Client{base: strings.TrimRight(base, "/"), http: rc}
}

// APIError is an error answer of the admin API.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("admin API: %s (HTTP %d)", e.Message, e.Status) }

func (c *Client) do(ctx context.Context, method, path string, out any) error {
	req, err := retryablehttp.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return err
	}
	return c.send(req, path, out)
}

// send sends req and decodes its answer into out (nil: none); an error
// answer is an *APIError.
func (c *Client) send(req *retryablehttp.Request, path string, out any) error {
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("admin API at %s unreachable: %w", c.base, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var eb ErrorBody
		if json.Unmarshal(body, &eb) != nil || eb.Error == "" {
			// Not the API's own answer (a proxy's page, say): its
			// first line, shortened, says enough.
			first, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
			if r := []rune(first); len(r) > 200 {
				first = string(r[:200]) + "…"
			}
			eb.Error = first
		}
		return &APIError{Status: resp.StatusCode, Message: eb.Error}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("admin API %s: bad JSON: %w", path, err)
	}
	return nil
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// Transactions lists transactions.
func (c *Client) Transactions(ctx context.Context, f ListFilter) ([]Txn, error) {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", f.State)
	}
	if f.MinDuration > 0 {
		q.Set("duration_filter", f.MinDuration.String())
	}
	path := "/v1/transactions"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out []Txn
	return out, c.do(ctx, http.MethodGet, path, &out)
}

// Transaction describes one transaction.
func (c *Client) Transaction(ctx context.Context, id string) (Txn, error) {
	var out Txn
	return out, c.do(ctx, http.MethodGet, "/v1/transactions/"+url.PathEscape(id), &out)
}

// Abort aborts one transaction (Backend.Abort).
func (c *Client) Abort(ctx context.Context, id string) (Txn, error) {
	return c.AbortForce(ctx, id, false)
}

// AbortForce is Abort with ?force=true when force is set.
func (c *Client) AbortForce(ctx context.Context, id string, force bool) (Txn, error) {
	var out Txn
	path := "/v1/transactions/" + url.PathEscape(id) + "/abort"
	if force {
		path += "?force=true"
	}
	return out, c.do(ctx, http.MethodPost, path, &out)
}

// RetryMarkers resends a stuck transaction's markers.
func (c *Client) RetryMarkers(ctx context.Context, id string) (Txn, error) {
	var out Txn
	return out, c.do(ctx, http.MethodPost, "/v1/transactions/"+url.PathEscape(id)+"/retry-markers", &out)
}

// Leaders lists the leaders with their negotiated marker versions.
func (c *Client) Leaders(ctx context.Context) ([]markersender.LeaderStatus, error) {
	var out []markersender.LeaderStatus
	return out, c.do(ctx, http.MethodGet, "/v1/leaders", &out)
}

// Markers lists pending and stuck markers.
func (c *Client) Markers(ctx context.Context) ([]markersender.PendingTxn, error) {
	var out []markersender.PendingTxn
	return out, c.do(ctx, http.MethodGet, "/v1/markers", &out)
}

// Coordinators lists the cluster's coordinators with the partitions they
// own (GET /v1/coordinators; 404 from a node that does not report them).
func (c *Client) Coordinators(ctx context.Context) ([]CoordinatorStatus, error) {
	var out []CoordinatorStatus
	return out, c.do(ctx, http.MethodGet, "/v1/coordinators", &out)
}

// Raw fetches a path as text (for /metrics).
func (c *Client) Raw(ctx context.Context, path string) (string, error) {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("admin API at %s unreachable: %w", c.base, unwrapURLError(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
