package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// TestServeTypeChange: a push to bulkmove serve with --delete replaces
// every entry whose type changed in one pass (serve's receiver is told of
// --delete in the handshake).
func TestServeTypeChange(t *testing.T) {
	dir := shmDir(t)
	root := filepath.Join(dir, "root")
	addr, fp, tok := startServeBin(t, dir, "data="+root)
	src, dst := filepath.Join(dir, "src"), filepath.Join(root, "dst")
	outside := typeChanged(t, src, dst)
	url := fmt.Sprintf("bulkmove://%s/data/dst", addr)
	out, code := runBM(t, nil, "-j", "2", "--delete", "--token-file", tok, "--fingerprint", fp, src, url)
	if code != 0 || strings.Contains(out, "in the way") {
		t.Fatalf("push with --delete: exit %d:\n%s", code, out)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
	outsideUntouched(t, outside)
}
