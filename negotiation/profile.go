package negotiation

import (
	"fmt"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kversion"
)

// profiles maps the Kafka versions txncoord can pretend to be to franz-go's
// kversion presets, which hold the exact per-key ranges of each release.
// What a node really advertises is also clamped by what txncoord implements
// (wire registrations).
var profiles = map[string]func() *kversion.Versions{
	"3.9": kversion.V3_9_0,
	"4.0": kversion.V4_0_0,
	"4.1": kversion.V4_1_0,
	"4.2": kversion.V4_2_0,
	"4.3": kversion.V4_3_0,
	"4.4": kversion.V4_4_0,
}

// Profile returns the version profile of a Kafka version name ("4.2").
func Profile(kafkaVersion string) (*kversion.Versions, error) {
	p, ok := profiles[kafkaVersion]
	if !ok {
		return nil, fmt.Errorf("unknown kafka_version %q (known: %v)", kafkaVersion, ProfileNames())
	}
	return p(), nil
}

// ProfileNames lists the known Kafka version names in order.
func ProfileNames() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// maxVersions caches every profile's maximum versions by key: building a
// kversion preset allocates every release up to it, and MaxVersion is
// asked on hot paths (the cluster's transaction.version, each ApiVersions
// answer).
var maxVersions = sync.OnceValue(func() map[string]map[int16]int16 {
	out := make(map[string]map[int16]int16, len(profiles))
	for name, p := range profiles {
		keys := map[int16]int16{}
		p().EachMaxKeyVersion(func(key, max int16) { keys[key] = max })
		out[name] = keys
	}
	return out
})

// MaxVersion is a profile's maximum version of key, or -1.
func MaxVersion(kafkaVersion string, key int16) int16 {
	keys, ok := maxVersions()[kafkaVersion]
	if !ok {
		return -1
	}
	v, ok := keys[key]
	if !ok {
		return -1
	}
	return v
}
