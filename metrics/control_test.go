package metrics

import "testing"

// TestListenAddr: an address without a host is loopback's; any host is
// kept as given.
func TestListenAddr(t *testing.T) {
	for _, c := range []struct {
		in, want string
		loopback bool
	}{
		{":9100", "127.0.0.1:9100", true},
		{":0", "127.0.0.1:0", true},
		{"0.0.0.0:9100", "0.0.0.0:9100", false},
		{"[::]:9100", "[::]:9100", false},
		{"mover01.example.org:9100", "mover01.example.org:9100", false},
		{"9100", "9100", false}, // not an address: net.Listen says so
	} {
		if got, lo := ListenAddr(c.in); got != c.want || lo != c.loopback {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q, %v", c.in, got, lo, c.want, c.loopback)
		}
	}
}
