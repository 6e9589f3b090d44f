package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// ACLs in the admin API: GET /v1/acls (query parameters filter),
// POST /v1/acls (create), POST /v1/acls/delete (delete what a filter
// matches), and `txncoord acls list|create|delete`, in the style of
// kafka-acls.sh. The admin token is the admin principal: these are the
// way to grant the first ACLs of a cluster with security on. The node
// serves them when its Backend implements ACLsBackend (a coordinator:
// the controller's security metadata where it runs the controller, the
// holder's answers elsewhere).

// ACL is one binding, with Kafka's names for every enum (TOPIC, GROUP,
// CLUSTER, TRANSACTIONAL_ID; LITERAL, PREFIXED; READ, WRITE, ...; ALLOW,
// DENY).
type ACL struct {
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

// ACLFilter selects ACLs: an empty field matches anything (ANY); pattern
// type MATCH selects the bindings that apply to the named resource.
type ACLFilter struct {
	ResourceType string `json:"resource_type,omitempty"`
	ResourceName string `json:"resource_name,omitempty"`
	PatternType  string `json:"pattern_type,omitempty"`
	Principal    string `json:"principal,omitempty"`
	Host         string `json:"host,omitempty"`
	Operation    string `json:"operation,omitempty"`
	Permission   string `json:"permission,omitempty"`
}

// ACLsBackend is what the ACL endpoints read and change. Errors wrapping
// ErrInvalid are 400, those wrapping ErrConflict (no authorizer) 409.
type ACLsBackend interface {
	ACLs(ctx context.Context, f ACLFilter) ([]ACL, error)
	CreateACLs(ctx context.Context, acls []ACL) error
	DeleteACLs(ctx context.Context, f ACLFilter) ([]ACL, error)
}

var errNoACLs = errorString("no controller on this node: ACLs are served by the coordinator node's admin API")

func aclRoutes(mux *http.ServeMux, b Backend) {
	ab, ok := b.(ACLsBackend)
	serve := servedIf(ok, errNoACLs)
	mux.HandleFunc("GET /v1/acls", serve(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		f := ACLFilter{ResourceType: q.Get("resource_type"), ResourceName: q.Get("resource_name"), PatternType: q.Get("pattern_type"),
			Principal: q.Get("principal"), Host: q.Get("host"), Operation: q.Get("operation"), Permission: q.Get("permission")}
		acls, err := ab.ACLs(r.Context(), f)
		if err != nil {
			writeACLError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, nonNil(acls))
	}))
	mux.HandleFunc("POST /v1/acls", serve(func(w http.ResponseWriter, r *http.Request) {
		var acls []ACL
		if err := decodeBody(r, &acls); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("body: want a JSON list of ACLs: %v", err))
			return
		}
		if err := ab.CreateACLs(r.Context(), acls); err != nil {
			writeACLError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, nonNil(acls))
	}))
	mux.HandleFunc("POST /v1/acls/delete", serve(func(w http.ResponseWriter, r *http.Request) {
		var f ACLFilter
		if err := decodeBody(r, &f); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("body: want a JSON ACL filter: %v", err))
			return
		}
		deleted, err := ab.DeleteACLs(r.Context(), f)
		if err != nil {
			writeACLError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, nonNil(deleted))
	}))
}

func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxCreateBody))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func writeACLError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrInvalid) {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	writeBackendError(w, err)
}

// ACLs lists the ACLs f matches.
func (c *Client) ACLs(ctx context.Context, f ACLFilter) ([]ACL, error) {
	q := url.Values{}
	for k, v := range map[string]string{"resource_type": f.ResourceType, "resource_name": f.ResourceName, "pattern_type": f.PatternType,
		"principal": f.Principal, "host": f.Host, "operation": f.Operation, "permission": f.Permission} {
		if v != "" {
			q.Set(k, v)
		}
	}
	path := "/v1/acls"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out []ACL
	return out, c.do(ctx, http.MethodGet, path, &out)
}

// CreateACLs creates acls (all or none).
func (c *Client) CreateACLs(ctx context.Context, acls []ACL) error {
	return c.doJSON(ctx, http.MethodPost, "/v1/acls", acls, nil)
}

// DeleteACLs deletes the ACLs f matches and returns them.
func (c *Client) DeleteACLs(ctx context.Context, f ACLFilter) ([]ACL, error) {
	var out []ACL
	return out, c.doJSON(ctx, http.MethodPost, "/v1/acls/delete", f, &out)
}
