package faultproxy_test

import (
	"testing"
)

// BenchmarkRoundTrip is one WriteTxnMarkers request and response through
// the proxy (pass-through), to compare with a direct connection.
func BenchmarkRoundTrip(b *testing.B) {
	for _, via := range []string{"direct", "proxy"} {
		b.Run(via, func(b *testing.B) {
			f := start(b)
			addr := f.server.Addr().String()
			if via == "proxy" {
				addr = f.proxy.Addr()
			}
			c := dial(b, addr)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Do(b.Context(), marker(2, int64(i), 0)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
