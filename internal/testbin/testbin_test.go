package testbin_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/testbin"
)

// built is the binary TestBuild was given, for TestMain to check that
// WithCleanup removed it.
var built string

func TestMain(m *testing.M) {
	code := testbin.WithCleanup(m).Run()
	if built != "" {
		if _, err := os.Stat(filepath.Dir(built)); !os.IsNotExist(err) {
			fmt.Fprintf(os.Stderr, "the directory of %s is still there after the tests (%v)\n", built, err)
			code = 1
		}
	}
	os.Exit(code)
}

// TestBuild: the binary runs, and a second call builds nothing new.
func TestBuild(t *testing.T) {
	bin := testbin.Build(t)
	built = bin
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if again := testbin.Build(t); again != bin {
		t.Fatalf("second Build: %s, want %s", again, bin)
	}
	if fi2, err := os.Stat(bin); err != nil || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("second Build rebuilt the binary (%v)", err)
	}
}
