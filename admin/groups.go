package admin

import (
	"context"
	"net/http"
	"net/url"
	"sort"
)

// Consumer groups in the admin API: GET /v1/groups, GET /v1/groups/{id},
// DELETE /v1/groups/{id}, and `txncoord groups list|describe|delete`, in
// the style of kafka-consumer-groups.sh. The node serves them when its
// Backend also implements GroupsBackend (the coordinator node with its
// group coordinator); otherwise they answer 404 saying so.

// GroupSummary is one group as `groups list` shows it.
type GroupSummary struct {
	Group        string `json:"group"`
	Type         string `json:"type"`  // classic, consumer, share
	State        string `json:"state"` // Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
	ProtocolType string `json:"protocol_type"`
	Protocol     string `json:"protocol"` // the assignor, once chosen
	Generation   int32  `json:"generation"`
	MemberCount  int    `json:"member_count"`
	Coordinator  int32  `json:"coordinator"`
	// OffsetsPartition is the group's __consumer_offsets partition.
	OffsetsPartition int32 `json:"offsets_partition"`
}

// GroupMember is one member and its assignment.
type GroupMember struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	ClientID   string `json:"client_id"`
	Host       string `json:"host"`
	// Assignment is decoded for protocol type "consumer" (empty otherwise).
	Assignment []TopicPartition `json:"assignment"`
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// GroupOffset is one partition of a group: its committed offset, the
// partition's log end offset and the lag, as kafka-consumer-groups.sh
// --describe shows them, with the member it is assigned to.
type GroupOffset struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset int64  `json:"current_offset"` // -1: assigned, nothing committed
	// LogEndOffset is -1 when the leader could not be asked.
	LogEndOffset int64  `json:"log_end_offset"`
	Lag          int64  `json:"lag"` // -1 when unknown
	Metadata     string `json:"metadata,omitempty"`
	MemberID     string `json:"consumer_id,omitempty"`
	Host         string `json:"host,omitempty"`
	ClientID     string `json:"client_id,omitempty"`
}

// PendingOffset is an offset committed inside a transaction that has not
// ended yet: invisible to OffsetFetch until its COMMIT marker.
type PendingOffset struct {
	Group         string `json:"group"`
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Offset        int64  `json:"offset"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
}

// GroupDetail is one group in full.
type GroupDetail struct {
	GroupSummary
	Leader  string          `json:"leader,omitempty"`
	Members []GroupMember   `json:"members"`
	Offsets []GroupOffset   `json:"offsets"`
	Pending []PendingOffset `json:"pending_offsets"`
	// SharePartitions are a share group's partitions (type "share"), as
	// kafka-share-groups.sh --describe shows them.
	SharePartitions []SharePartition `json:"share_partitions,omitempty"`
}

// SharePartition is one partition of a share group: its share-partition
// start offset, the partition's high watermark, the lag between them, and
// the records in flight (acquired by a member, or available again for
// redelivery).
type SharePartition struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	StartOffset int64  `json:"start_offset"`
	EndOffset   int64  `json:"end_offset"` // -1 when unknown
	Lag         int64  `json:"lag"`
	Acquired    int    `json:"acquired"`
	Available   int    `json:"available"`
}

// GroupsBackend is what the groups endpoints read and ask; the node adapts
// its group coordinator to it. Errors: ErrGroupNotFound for an unknown group,
// ErrConflict for deleting a group that has members.
type GroupsBackend interface {
	Groups(ctx context.Context) ([]GroupSummary, error)
	Group(ctx context.Context, id string) (GroupDetail, error)
	DeleteGroup(ctx context.Context, id string) error
}

// Lag fills each offset's log end offset and lag from end (the partitions'
// log end offsets, as ListOffsets at their leaders answers them; a missing
// partition stays -1), and adds, for every partition assigned to a member
// without a committed offset, a row with CurrentOffset -1 as
// kafka-consumer-groups.sh shows them. Rows are sorted by topic and
// partition.
func Lag(d *GroupDetail, end map[TopicPartition]int64) {
	owner := map[TopicPartition]GroupMember{}
	for _, m := range d.Members {
		for _, tp := range m.Assignment {
			owner[tp] = m
		}
	}
	seen := map[TopicPartition]bool{}
	for i := range d.Offsets {
		o := &d.Offsets[i]
		tp := TopicPartition{o.Topic, o.Partition}
		seen[tp] = true
		if m, ok := owner[tp]; ok {
			o.MemberID, o.Host, o.ClientID = m.MemberID, m.Host, m.ClientID
		}
	}
	for tp, m := range owner {
		if !seen[tp] {
			d.Offsets = append(d.Offsets, GroupOffset{Topic: tp.Topic, Partition: tp.Partition, CurrentOffset: -1,
				MemberID: m.MemberID, Host: m.Host, ClientID: m.ClientID})
		}
	}
	for i := range d.Offsets {
		o := &d.Offsets[i]
		o.LogEndOffset, o.Lag = -1, -1
		if e, ok := end[TopicPartition{o.Topic, o.Partition}]; ok {
			o.LogEndOffset = e
			if o.CurrentOffset >= 0 {
				o.Lag = max(e-o.CurrentOffset, 0)
			}
		}
	}
	sort.Slice(d.Offsets, func(i, j int) bool {
		a, b := d.Offsets[i], d.Offsets[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
}

// groupRoutes adds the groups endpoints to mux.
func groupRoutes(mux *http.ServeMux, b Backend) {
	gb, ok := b.(GroupsBackend)
	serve := servedIf(ok, errNoGroups)
	mux.HandleFunc("GET /v1/groups", serve(func(w http.ResponseWriter, r *http.Request) {
		gs, err := gb.Groups(r.Context())
		if err != nil {
			writeBackendError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, nonNil(gs))
	}))
	mux.HandleFunc("GET /v1/groups/{id}", serve(func(w http.ResponseWriter, r *http.Request) {
		g, err := gb.Group(r.Context(), r.PathValue("id"))
		if err != nil {
			writeBackendError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, g)
	}))
	mux.HandleFunc("DELETE /v1/groups/{id}", serve(func(w http.ResponseWriter, r *http.Request) {
		if err := gb.DeleteGroup(r.Context(), r.PathValue("id")); err != nil {
			writeBackendError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"deleted": r.PathValue("id")})
	}))
}

// ErrGroupNotFound is returned by GroupsBackend for an unknown group (HTTP
// 404).
var ErrGroupNotFound = errorString("group not found")

// errNoGroups answers the groups endpoints of a node without a group
// coordinator.
var errNoGroups = errorString("no group coordinator on this node: groups are served by the coordinator node's admin API")

type errorString string

func (e errorString) Error() string { return string(e) }

// Groups lists the consumer groups.
func (c *Client) Groups(ctx context.Context) ([]GroupSummary, error) {
	var out []GroupSummary
	return out, c.do(ctx, http.MethodGet, "/v1/groups", &out)
}

// Group describes one group, with its offsets and lag.
func (c *Client) Group(ctx context.Context, id string) (GroupDetail, error) {
	var out GroupDetail
	return out, c.do(ctx, http.MethodGet, "/v1/groups/"+url.PathEscape(id), &out)
}

// DeleteGroup deletes an empty group and its committed offsets.
func (c *Client) DeleteGroup(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/groups/"+url.PathEscape(id), nil)
}
