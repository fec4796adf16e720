package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestVersionLdflags: a packager's -ldflags -X sets the version and the
// revision that `bulkmove version` prints, and the version is the one the
// agent cache and the remote PATH lookup match on ("bulkmove VERSION
// (protocol N,").
func TestVersionLdflags(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds bulkmove")
	}
	bin := filepath.Join(t.TempDir(), "bulkmove")
	const pkg = "github.com/bulkmove/bulkmove/internal/buildinfo"
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X "+pkg+".version=9.8.7-1 -X "+pkg+".revision=0123456789ab", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want := regexp.MustCompile(`^bulkmove 9\.8\.7-1 \(protocol \d+, revision 0123456789ab, go\S+, ` + runtime.GOOS + `/` + runtime.GOARCH + `\)\n$`)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("bulkmove %s: %v", strings.Join(args, " "), err)
		}
		if !want.Match(out) {
			t.Errorf("bulkmove %s printed %q, want it to match %s", strings.Join(args, " "), out, want)
		}
	}
}
