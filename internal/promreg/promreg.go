package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c in reg, or returns the collector of the same type
// already registered under its descriptors. Any other refusal (a
// registerer whose constant labels clash) leaves c unregistered: its
// series are kept, unexported.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}
