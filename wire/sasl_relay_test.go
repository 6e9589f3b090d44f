package wire

import "testing"

func TestSCRAMUser(t *testing.T) {
	for _, tc := range []struct {
		first, user string
		ok          bool
	}{
		{"n,,n=alice,r=abc", "alice", true},
		{"n,a=alice,n=alice,r=abc", "alice", true},
		{"y,,n=a=2Cb=3Dc,r=abc", "a,b=c", true},
		{"n,,r=abc", "", false},
		{"garbage", "", false},
	} {
		user, ok := scramUser([]byte(tc.first))
		if user != tc.user || ok != tc.ok {
			t.Errorf("scramUser(%q) = %q, %v; want %q, %v", tc.first, user, ok, tc.user, tc.ok)
		}
	}
}
