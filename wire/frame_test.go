package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHeaderFlexibleMatchesKmsg checks the flexibility table against
// kmsg for every key and version, versions kmsg does not know included
// (they take the newest version's header).
func TestHeaderFlexibleMatchesKmsg(t *testing.T) {
	checked := 0
	for k := int16(-1); k < 300; k++ {
		for _, v := range []int16{-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 30, 32767} {
			want := false
			if req := kmsg.RequestForKey(k); req != nil {
				sv := v
				if sv > req.MaxVersion() || sv < 0 {
					sv = req.MaxVersion()
				}
				req.SetVersion(sv)
				want = req.IsFlexible()
				checked++
			}
			if got := headerFlexible(k, v); got != want {
				t.Fatalf("key %d version %d: flexible %v, kmsg says %v", k, v, got, want)
			}
		}
	}
	if checked == 0 {
		t.Fatal("kmsg knows no key")
	}
}

// TestParseHeaderReusesClientID checks that a header with the previous
// request's client id answers the same pointer, and one with another id
// or none does not.
func TestParseHeaderReusesClientID(t *testing.T) {
	frame := func(clientID *string) []byte {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(11) // flexible: header v2, tags after the id
		return reencode(header{correlationID: 7, clientID: clientID}, req)[4:]
	}
	a, b := "producer-a", "producer-b"
	h1, body1, err := parseHeaderReusing(frame(&a), nil)
	if err != nil || h1.clientID == nil || *h1.clientID != a {
		t.Fatalf("first header: %+v, %v", h1, err)
	}
	h2, body2, err := parseHeaderReusing(frame(&a), h1.clientID)
	if err != nil || h2.clientID != h1.clientID {
		t.Fatalf("same id: got %p, want the previous %p (%v)", h2.clientID, h1.clientID, err)
	}
	if len(body1) != len(body2) {
		t.Fatalf("bodies differ: %d and %d bytes", len(body1), len(body2))
	}
	h3, _, err := parseHeaderReusing(frame(&b), h1.clientID)
	if err != nil || h3.clientID == h1.clientID || h3.clientID == nil || *h3.clientID != b {
		t.Fatalf("another id: %+v, %v", h3, err)
	}
	h4, _, err := parseHeaderReusing(frame(nil), h1.clientID)
	if err != nil || h4.clientID != nil {
		t.Fatalf("null id: %+v, %v", h4, err)
	}
}
