package topics

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/txncoord/txncoord/internal/recordio"
	"github.com/txncoord/txncoord/shares"
	"github.com/txncoord/txncoord/storage"
)

// Group configs (ConfigResource GROUP, KIP-848/KIP-932: share.* and
// consumer.*) are the controller's, as in KRaft: altered through
// AlterConfigs and IncrementalAlterConfigs, stored in the controller's
// space, shown in the view (cluster.View.GroupConfigs) once durable,
// where the group coordinator and the leaders read them.
//
// Record, version groupConfigVersion (big endian; n is a uvarint):
//
//	u8 version, n + group, n configs, each: n + name, n + value (sorted)
//
// No configs: the group's explicit configs are removed. bbolt:
// group_configs/<group> → the record.
const groupConfigVersion = 2

var bucketGroupConfigs = []byte("group_configs")

func encodeGroupConfigs(group string, configs map[string]string) []byte {
	out := []byte{groupConfigVersion}
	out = appendString(out, group)
	keys := slices.Sorted(maps.Keys(configs))
	out = binary.AppendUvarint(out, uint64(len(keys)))
	for _, k := range keys {
		out = appendString(out, k)
		out = appendString(out, configs[k])
	}
	return out
}

func decodeGroupConfigs(raw []byte) (string, map[string]string, error) {
	r := recordio.NewReader(raw, errBadRecord)
	if v := r.Take(1); v == nil || v[0] != groupConfigVersion {
		return "", nil, fmt.Errorf("%w: unknown version", errBadRecord)
	}
	group := r.String()
	configs := map[string]string{}
	for n := r.Uvarint(); n > 0 && r.Err() == nil; n-- {
		k := r.String()
		configs[k] = r.String()
	}
	if r.Err() == nil && r.Len() != 0 {
		r.Fail()
	}
	return group, configs, r.Err()
}

func applyGroupConfigs(root storage.Root, raw []byte) error {
	group, configs, err := decodeGroupConfigs(raw)
	if err != nil {
		return err
	}
	b, err := root.CreateBucketIfNotExists(bucketGroupConfigs)
	if err != nil {
		return err
	}
	if len(configs) == 0 {
		return b.Delete([]byte(group))
	}
	return b.Put([]byte(group), raw)
}

// AlterGroupConfigs replaces a group's explicit configs (configs is its
// whole explicit config after the change; none removes them), validated
// by shares.ValidateGroupConfigs (INVALID_CONFIG); validateOnly checks
// only. A group need not exist: Kafka lets its configs be set first.
func (c *Controller) AlterGroupConfigs(ctx context.Context, group string, configs map[string]string, validateOnly bool) error {
	if group == "" {
		return fmt.Errorf("group name must not be empty: %w", kerr.InvalidRequest)
	}
	if err := shares.ValidateGroupConfigs(configs); err != nil {
		return fmt.Errorf("%s: %w", err.Error(), kerr.InvalidConfig)
	}
	if validateOnly {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.recs.Commit([][]byte{encodeGroupConfigs(group, configs)}); err != nil {
		c.log.Error().Err(err).Msg("group config change not durable")
		return fmt.Errorf("%w: %w", commitCode(err), err)
	}
	c.view.SetGroupConfigs(group, configs)
	c.log.Info().Str("group", group).Int("configs", len(configs)).Msg("group configs stored")
	return nil
}
