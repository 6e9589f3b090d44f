package authmeta

import (
	"encoding/binary"
	"maps"
	"math"
	"net"
	"slices"
	"strings"

	"github.com/txncoord/txncoord/internal/recordio"
)

// Client quotas (KIP-546) as Kafka stores them: values by entity. An
// entity is a set of (type, name) with types user, client-id (alone or
// together) or ip (alone); a nil name is the type's default entity.
// txncoord stores and describes them; it does not enforce them.

// QuotaComponent is one part of a quota entity.
type QuotaComponent struct {
	Type string
	Name *string // nil: the default entity of Type
}

// quota types and keys, as Kafka's QuotaConfig defines them.
const (
	quotaUser     = "user"
	quotaClientID = "client-id"
	quotaIP       = "ip"
)

// quotaKeys are the keys each kind of entity takes; whole says the value
// must be a whole number (Kafka's LONG and INT keys).
var (
	clientQuotaKeys = map[string]bool{"producer_byte_rate": true, "consumer_byte_rate": true,
		"request_percentage": false, "controller_mutation_rate": false}
	ipQuotaKeys = map[string]bool{"connection_creation_rate": true}
)

// quotaEntityKey is an entity's canonical form: its components sorted by
// type, each type=name ("type" alone for a default), joined by ",". Names
// are escaped so that the form is unambiguous.
func quotaEntityKey(es []QuotaComponent) string {
	sorted := slices.Clone(es)
	slices.SortFunc(sorted, func(a, b QuotaComponent) int { return strings.Compare(a.Type, b.Type) })
	var b strings.Builder
	for i, e := range sorted {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e.Type)
		if e.Name != nil {
			b.WriteByte('=')
			b.WriteString(strings.NewReplacer(`\`, `\\`, `,`, `\,`).Replace(*e.Name))
		}
	}
	return b.String()
}

// validQuotaEntity is Kafka's check of an entity (ClientQuotaControlManager):
// the message of its INVALID_REQUEST, or "".
func validQuotaEntity(es []QuotaComponent) string {
	if len(es) == 0 {
		return "Invalid empty client quota entity"
	}
	seen := map[string]bool{}
	for _, e := range es {
		switch e.Type {
		case quotaUser, quotaClientID, quotaIP:
		default:
			return "Unhandled client quota entity type: " + e.Type
		}
		if seen[e.Type] {
			return "Duplicate entity type " + e.Type
		}
		seen[e.Type] = true
		if e.Type == quotaIP && e.Name != nil && net.ParseIP(*e.Name) == nil {
			return *e.Name + " is not a valid IP"
		}
	}
	if seen[quotaIP] && len(es) > 1 {
		return "Invalid quota entity combination, IP entity should not be used with user/client ID entity."
	}
	return ""
}

// validQuotaValue checks one key and value for entity es.
func validQuotaValue(es []QuotaComponent, key string, value float64, remove bool) string {
	keys := clientQuotaKeys
	if es[0].Type == quotaIP {
		keys = ipQuotaKeys
	}
	whole, ok := keys[key]
	switch {
	case !ok:
		return "Invalid configuration key " + key
	case remove:
		return ""
	case whole && value != math.Trunc(value):
		return "Configuration " + key + " must be a whole number value"
	case value <= 0 || math.IsNaN(value) || math.IsInf(value, 0):
		return "Configuration " + key + " must be greater than 0"
	}
	return ""
}

// quotaEntry is one stored entity and its values.
type quotaEntry struct {
	Entity []QuotaComponent
	Values map[string]float64
}

// Quota records (ops 5, 6): the entity (n components, each: type,
// u8 named, name if named), then for op 5 the values (n, each: key,
// u64 float bits). Op 5 replaces the entity's values; op 6 removes it.
const (
	opQuotaSet    byte = 5
	opQuotaDelete byte = 6
)

var bucketQuotas = []byte("quotas")

func appendQuotaEntity(out []byte, es []QuotaComponent) []byte {
	out = binary.AppendUvarint(out, uint64(len(es)))
	for _, e := range es {
		out = appendString(out, e.Type)
		if e.Name == nil {
			out = append(out, 0)
			continue
		}
		out = append(out, 1)
		out = appendString(out, *e.Name)
	}
	return out
}

func readQuotaEntity(r *recordio.Reader) []QuotaComponent {
	var es []QuotaComponent
	for n := r.Uvarint(); n > 0 && r.Err() == nil; n-- {
		e := QuotaComponent{Type: r.String()}
		if r.Flag() {
			name := r.String()
			e.Name = &name
		}
		es = append(es, e)
	}
	return es
}

func encodeQuotaValues(vs map[string]float64) []byte {
	var out []byte
	keys := slices.Sorted(maps.Keys(vs))
	out = binary.AppendUvarint(out, uint64(len(keys)))
	for _, k := range keys {
		out = appendString(out, k)
		out = binary.BigEndian.AppendUint64(out, math.Float64bits(vs[k]))
	}
	return out
}

func readQuotaValues(r *recordio.Reader) map[string]float64 {
	vs := map[string]float64{}
	for n := r.Uvarint(); n > 0 && r.Err() == nil; n-- {
		k := r.String()
		vs[k] = math.Float64frombits(uint64(r.Int64()))
	}
	return vs
}

func quotaRecord(e quotaEntry) []byte {
	if len(e.Values) == 0 {
		return appendQuotaEntity([]byte{recordVersion, opQuotaDelete}, e.Entity)
	}
	out := appendQuotaEntity([]byte{recordVersion, opQuotaSet}, e.Entity)
	return append(out, encodeQuotaValues(e.Values)...)
}

// SetQuotas applies the entries (already validated; an entry without
// values removes its entity), durable before it returns.
func (s *State) setQuotas(entries []quotaEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := maps.Clone(*s.quotas.Load())
	var recs [][]byte
	for _, e := range entries {
		k := quotaEntityKey(e.Entity)
		if len(e.Values) == 0 {
			delete(next, k)
		} else {
			next[k] = e
		}
		recs = append(recs, quotaRecord(e))
	}
	return s.commitLocked(recs, func() {
		s.quotas.Store(&next)
		s.log.Info().Int("changes", len(recs)).Msg("client quotas altered")
	})
}
