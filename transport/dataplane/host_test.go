package dataplane

import (
	"os"
	"testing"
)

// TestHost: a data plane listens where it is asked to, else
// on the address the sender's SSH connection reached (SSH_CONNECTION's
// third field), else (not under SSH) on all addresses.
func TestHost(t *testing.T) {
	t.Setenv("SSH_CONNECTION", "10.1.2.3 50022 192.0.2.7 22")
	for asked, want := range map[string]string{"": "192.0.2.7", "0.0.0.0": "0.0.0.0", "[::]": "::", "198.51.100.1": "198.51.100.1"} {
		if got := Host(asked); got != want {
			t.Errorf("Host(%q) = %q, want %q", asked, got, want)
		}
	}
	t.Setenv("SSH_CONNECTION", "fe80::1 50022 2001:db8::7 22")
	if got := Host(""); got != "2001:db8::7" {
		t.Errorf("over IPv6: %q", got)
	}
	os.Unsetenv("SSH_CONNECTION")
	if got := Host(""); got != "" {
		t.Errorf("outside SSH: %q, want all addresses", got)
	}
}
