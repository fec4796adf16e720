package main

import (
	"strings"
	"testing"
)

// TestDataAddrFlag: the sender's --data-addr must be an IP address.
func TestDataAddrFlag(t *testing.T) {
	out, code := runBM(t, nil, "--transport", "tls", "--data-addr", "box2", "/nonexistent", "box2:/x")
	if code != exitUsage || !strings.Contains(out, `--data-addr "box2": want an IP address`) {
		t.Errorf("--data-addr box2: exit %d, want a usage error:\n%s", code, out)
	}
}
