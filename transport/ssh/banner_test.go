package ssh

import (
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/transport"
	"github.com/bulkmove/bulkmove/wire"
)

// TestBadBannerHidesTokens: a banner the sender cannot use is quoted in
// its error without the tokens it carries (the linger token, the data
// plane's offer), which would otherwise reach the terminal and logs.
func TestBadBannerHidesTokens(t *testing.T) {
	const linger, data = "5e6f0c1d2a3b4c5d6e7f8091a2b3c4d5", "f00dfeedcafe0123456789abcdef0123"
	line := wire.AgentBanner + "/run/user/0/bulkmove/agent-x.sock linger=" + linger + " data=tls:50000:abcd:" + data + "\n"
	tr := New(Config{Dialer: &transport.Dialer{}})
	_, err := tr.banner("box2", line)
	if err == nil {
		t.Fatal("a banner without a job was taken")
	}
	for _, secret := range []string{linger, data, linger[:12], data[:12]} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows a token: %v", err)
		}
	}
	if !strings.Contains(err.Error(), "linger=...") || !strings.Contains(err.Error(), "agent-x.sock") {
		t.Errorf("the error no longer shows the banner's shape: %v", err)
	}
}
