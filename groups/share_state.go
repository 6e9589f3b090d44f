package groups

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/shares"
)

// ShareState is the share partitions' state at the partition leaders, as
// the group coordinator reaches it (the node assembly wires it to the
// leaders of its process): the coordinator releases a departed member's
// records, and serves the share-group offset admin APIs with it.
type ShareState interface {
	// ReleaseMember releases the records member of group holds, at
	// every leader.
	ReleaseMember(group, member string)
	// Partitions lists group's share partitions, at every leader (an
	// error: a leader could not be asked).
	Partitions(ctx context.Context, group string) ([]SharePartition, error)
	// Alter sets a share-partition start offset (creating the share
	// partition), durably.
	Alter(ctx context.Context, group, topic string, partition int32, offset int64) error
	// Delete forgets group's share partitions of topic ("" every topic),
	// durably.
	Delete(ctx context.Context, group, topic string) error
}

// SharePartition is one share partition of a group.
type SharePartition struct {
	Topic                       string
	Partition                   int32
	StartOffset, EndOffset, Lag int64
	Acquired, Available         int
}

// shareConfig is a group's effective share configuration, from its
// group configs; the session timeout and heartbeat interval default to
// the coordinator's Timeouts.
func (c *Coordinator) shareConfig(group string) shares.Config {
	explicit := c.cfg.View.GroupConfigs(group)
	cfg := shares.ConfigOf(explicit)
	if _, ok := explicit["share.session.timeout.ms"]; !ok && c.cfg.Timeouts.ShareSession > 0 {
		cfg.SessionTimeout = c.cfg.Timeouts.ShareSession
	}
	if _, ok := explicit["share.heartbeat.interval.ms"]; !ok && c.cfg.Timeouts.ShareHeartbeat > 0 {
		cfg.HeartbeatInterval = c.cfg.Timeouts.ShareHeartbeat
	}
	return cfg
}

// releaseShareMembers hands the records of departed members back to
// their groups (outside the coordinator's lock: the leaders write).
func (c *Coordinator) releaseShareMembers(refs []ShareMemberRef) {
	if c.cfg.Shares == nil {
		return
	}
	for _, r := range refs {
		c.cfg.Shares.ReleaseMember(r.Group, r.Member)
	}
}

func errorsAs(err error, target **kerr.Error) bool { return errors.As(err, target) }

// shareStateTimeout bounds asking the leaders for a share group's state
// outside a request (the admin views).
const shareStateTimeout = 10 * time.Second
