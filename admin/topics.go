package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/hashicorp/go-retryablehttp"
)

// Topics in the admin API: GET /v1/topics, GET /v1/topics/{name},
// GET /v1/topics/{name}/offsets, POST /v1/topics, DELETE /v1/topics/{name}, and `txncoord topics
// list|create|describe|delete`, in the style of kafka-topics.sh. The node
// serves them when its Backend also implements TopicsBackend (the
// coordinator node, which runs the topic controller); otherwise they
// answer 404 saying so.

// Topic is one topic as the admin API shows it.
type Topic struct {
	Name string `json:"name"`
	// ID is Kafka's text form of the topic id, as kafka-topics.sh prints
	// it (URL-safe base64, no padding).
	ID         string `json:"id"`
	Partitions int32  `json:"partitions"`
	// ReplicationFactor is what txncoord keeps (one replica per
	// partition); RequestedReplicationFactor what it was created with.
	ReplicationFactor          int16             `json:"replication_factor"`
	RequestedReplicationFactor int16             `json:"requested_replication_factor"`
	Internal                   bool              `json:"internal,omitempty"`
	Configs                    map[string]string `json:"configs"`
	// PartitionInfo, by partition (describe only): leader, replicas, ISR.
	PartitionInfo []TopicPartitionInfo `json:"partition_info,omitempty"`
}

// TopicPartitionInfo is one partition as kafka-topics.sh --describe
// shows it.
type TopicPartitionInfo struct {
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	Isr       []int32 `json:"isr"`
	// CleanableRatio, for a partition of a compacted topic whose leader
	// runs in the admin API's process (`txncoord up`): its dirty bytes
	// over its cleanable bytes when the log cleaner last looked.
	CleanableRatio *float64 `json:"cleanable_ratio,omitempty"`
}

// CreateTopic is the body of POST /v1/topics. Partitions and
// ReplicationFactor 0 (or -1) take the cluster's defaults
// (default_partitions; 1).
type CreateTopic struct {
	Name              string            `json:"name"`
	Partitions        int32             `json:"partitions,omitempty"`
	ReplicationFactor int16             `json:"replication_factor,omitempty"`
	Configs           map[string]string `json:"configs,omitempty"`
	// ValidateOnly checks everything and creates nothing.
	ValidateOnly bool `json:"validate_only,omitempty"`
}

// TopicsBackend is what the topics endpoints read and ask; the node adapts
// its topic controller to it. Errors: ErrTopicNotFound (404),
// ErrTopicExists (409), ErrInvalid (400: a bad name, count, replication
// factor or config, or a policy refusal), anything else 500.
type TopicsBackend interface {
	Topics(ctx context.Context) ([]Topic, error)
	Topic(ctx context.Context, name string) (Topic, error)
	CreateTopic(ctx context.Context, req CreateTopic) (Topic, error)
	DeleteTopic(ctx context.Context, name string) error
}

// PartitionOffsets is one partition's offsets as its leader answers
// ListOffsets (latest): the high watermark (read_uncommitted) and the last
// stable offset (read_committed), below which no transaction is open; -1
// when the leader could not be asked.
type PartitionOffsets struct {
	Partition        int32 `json:"partition"`
	Leader           int32 `json:"leader"`
	HighWatermark    int64 `json:"high_watermark"`
	LastStableOffset int64 `json:"last_stable_offset"`
	// Producers are the partition's active producers as its leader
	// answers DescribeProducers (kafka-transactions.sh
	// describe-producers); current_txn_start_offset, when not -1, is where
	// an open transaction starts (find-hanging). Left out when the leader
	// could not be asked.
	Producers []ProducerState `json:"producers,omitempty"`
}

// ProducerState is one active producer of a partition (DescribeProducers).
type ProducerState struct {
	ProducerID            int64 `json:"producer_id"`
	ProducerEpoch         int32 `json:"producer_epoch"`
	LastSequence          int32 `json:"last_sequence"`
	LastTimestampMs       int64 `json:"last_timestamp_ms"`
	CoordinatorEpoch      int32 `json:"coordinator_epoch"`
	CurrentTxnStartOffset int64 `json:"current_txn_start_offset"`
}

// PartitionOffsetsBackend serves GET /v1/topics/{name}/offsets (an
// addition; the console's topic view). Errors as TopicsBackend's.
type PartitionOffsetsBackend interface {
	PartitionOffsets(ctx context.Context, topic string) ([]PartitionOffsets, error)
}

// PartitionOffsetsPager is a PartitionOffsetsBackend that asks the leaders
// for one page of partitions only (offset, limit; limit 0: no limit) and
// says how many the topic has.
type PartitionOffsetsPager interface {
	PartitionOffsetsPage(ctx context.Context, topic string, offset, limit int) ([]PartitionOffsets, int, error)
}

// errNoOffsets answers GET /v1/topics/{name}/offsets on a node that does
// not reach the leaders for them.
var errNoOffsets = errorString("this node does not report partition offsets: ask the coordinator node's admin API")

// Errors of TopicsBackend.
var (
	ErrTopicNotFound = errorString("topic not found")
	ErrTopicExists   = errorString("topic already exists")
	ErrInvalid       = errorString("invalid request")
)

// errNoTopics answers the topics endpoints of a node without the topic
// controller.
var errNoTopics = errorString("no topic controller on this node: topics are served by the coordinator node's admin API")

// maxCreateBody bounds POST /v1/topics's body.
const maxCreateBody = 1 << 20

// topicRoutes adds the topics endpoints to mux.
func topicRoutes(mux *http.ServeMux, b Backend) {
	tb, ok := b.(TopicsBackend)
	serve := servedIf(ok, errNoTopics)
	mux.HandleFunc("GET /v1/topics", serve(func(w http.ResponseWriter, r *http.Request) {
		ts, err := tb.Topics(r.Context())
		if err != nil {
			writeTopicError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, nonNil(ts))
	}))
	mux.HandleFunc("GET /v1/topics/{name}", serve(func(w http.ResponseWriter, r *http.Request) {
		t, err := tb.Topic(r.Context(), r.PathValue("name"))
		if err != nil {
			writeTopicError(w, err)
			return
		}
		if t.PartitionInfo, err = pageOf(w, r.URL.Query(), t.PartitionInfo); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, t)
	}))
	ob, hasOffsets := b.(PartitionOffsetsBackend)
	mux.HandleFunc("GET /v1/topics/{name}/offsets", servedIf(hasOffsets, errNoOffsets)(func(w http.ResponseWriter, r *http.Request) {
		p, err := parsePage(r.URL.Query())
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		if pager, ok := ob.(PartitionOffsetsPager); ok && p != (page{}) {
			os, total, err := pager.PartitionOffsetsPage(r.Context(), r.PathValue("name"), p.offset, p.limit)
			if err != nil {
				writeTopicError(w, err)
				return
			}
			w.Header().Set("X-Total-Count", strconv.Itoa(total))
			writeJSON(w, http.StatusOK, nonNil(os))
			return
		}
		os, err := ob.PartitionOffsets(r.Context(), r.PathValue("name"))
		if err != nil {
			writeTopicError(w, err)
			return
		}
		if os, err = pageOf(w, r.URL.Query(), os); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, nonNil(os))
	}))
	mux.HandleFunc("POST /v1/topics", serve(func(w http.ResponseWriter, r *http.Request) {
		var req CreateTopic
		dec := json.NewDecoder(io.LimitReader(r.Body, maxCreateBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("body: want a JSON object {\"name\", \"partitions\", \"replication_factor\", \"configs\"}: %v", err))
			return
		}
		if req.Name == "" {
			writeError(w, http.StatusBadRequest, errors.New("body: name is required"))
			return
		}
		t, err := tb.CreateTopic(r.Context(), req)
		if err != nil {
			writeTopicError(w, err)
			return
		}
		status := http.StatusCreated
		if req.ValidateOnly {
			status = http.StatusOK
		}
		writeJSON(w, status, t)
	}))
	mux.HandleFunc("DELETE /v1/topics/{name}", serve(func(w http.ResponseWriter, r *http.Request) {
		if err := tb.DeleteTopic(r.Context(), r.PathValue("name")); err != nil {
			writeTopicError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"deleted": r.PathValue("name")})
	}))
}

func writeTopicError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrTopicNotFound):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, ErrTopicExists), errors.Is(err, ErrConflict):
		writeError(w, http.StatusConflict, err)
	case errors.Is(err, ErrInvalid):
		writeError(w, http.StatusBadRequest, err)
	default:
		writeError(w, http.StatusInternalServerError, err)
	}
}

// Topics lists the topics, __consumer_offsets included.
func (c *Client) Topics(ctx context.Context) ([]Topic, error) {
	var out []Topic
	return out, c.do(ctx, http.MethodGet, "/v1/topics", &out)
}

// Topic describes one topic with its partitions.
func (c *Client) Topic(ctx context.Context, name string) (Topic, error) {
	var out Topic
	return out, c.do(ctx, http.MethodGet, "/v1/topics/"+url.PathEscape(name), &out)
}

// TopicOffsets is each partition's high watermark and last stable offset.
func (c *Client) TopicOffsets(ctx context.Context, name string) ([]PartitionOffsets, error) {
	var out []PartitionOffsets
	return out, c.do(ctx, http.MethodGet, "/v1/topics/"+url.PathEscape(name)+"/offsets", &out)
}

// CreateTopic creates a topic (or only checks it, ValidateOnly).
func (c *Client) CreateTopic(ctx context.Context, req CreateTopic) (Topic, error) {
	var out Topic
	return out, c.doJSON(ctx, http.MethodPost, "/v1/topics", req, &out)
}

// DeleteTopic deletes a topic: its leaders drop its data.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/topics/"+url.PathEscape(name), nil)
}

// doJSON is do with a JSON body. A POST is retried as do retries
// (connection errors, 5xx): a creation that went through before the
// answer was lost then answers 409, which the caller sees.
func (c *Client) doJSON(ctx context.Context, method, path string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.send(req, path, out)
}
