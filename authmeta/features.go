package authmeta

import (
	"encoding/binary"
	"maps"

	"github.com/txncoord/txncoord/internal/recordio"
	"github.com/txncoord/txncoord/storage"
)

// Finalized feature levels set by UpdateFeatures: a level here caps what
// the cluster would finalize by itself (the view computes
// transaction.version from its nodes' versions). Record op 7: the
// feature's name, i16 level, u64 epoch (the finalized features' epoch
// after the change, which ApiVersions reports).
const opFeatureSet byte = 7

var bucketFeatures = []byte("features")

type featureLevel struct {
	Level int16
	Epoch int64
}

func featureRecord(name string, level int16, epoch int64) []byte {
	out := appendString([]byte{recordVersion, opFeatureSet}, name)
	out = binary.BigEndian.AppendUint16(out, uint16(level))
	return binary.BigEndian.AppendUint64(out, uint64(epoch))
}

func applyFeature(root storage.Root, raw []byte) error {
	r := recordio.NewReader(raw[2:], errBadRecord)
	name := r.String()
	body := raw[len(raw)-r.Len():]
	r.Uint16()
	r.Int64()
	if r.Err() != nil || r.Len() != 0 || name == "" {
		return errBadRecord
	}
	b, err := root.CreateBucketIfNotExists(bucketFeatures)
	if err != nil {
		return err
	}
	return b.Put([]byte(name), body)
}

// FinalizedFeature is the level UpdateFeatures set for name, if any.
func (s *State) FinalizedFeature(name string) (int16, bool) {
	f, ok := (*s.features.Load())[name]
	return f.Level, ok
}

// FeatureEpoch is the finalized features' epoch: 1 until UpdateFeatures
// changes a level, then one more per change.
func (s *State) FeatureEpoch() int64 {
	epoch := int64(1)
	for _, f := range *s.features.Load() {
		epoch = max(epoch, f.Epoch)
	}
	return epoch
}

// SetSupportedFeatures tells the State which features the cluster
// supports and their level ranges (the view's, from its nodes' versions).
func (s *State) SetSupportedFeatures(f func() map[string][2]int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.supported = f
}

func (s *State) supportedFeatures() map[string][2]int16 {
	s.mu.Lock()
	f := s.supported
	s.mu.Unlock()
	if f == nil {
		return nil
	}
	return f()
}

// setFeatures finalizes levels, durable before it returns.
func (s *State) setFeatures(levels map[string]int16) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := maps.Clone(*s.features.Load())
	epoch := int64(1)
	for _, f := range next {
		epoch = max(epoch, f.Epoch)
	}
	var recs [][]byte
	for name, level := range levels {
		epoch++
		next[name] = featureLevel{Level: level, Epoch: epoch}
		recs = append(recs, featureRecord(name, level, epoch))
	}
	return s.commitLocked(recs, func() {
		s.features.Store(&next)
		s.log.Info().Any("levels", levels).Msg("features finalized")
	})
}
