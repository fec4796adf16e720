// Package testbin builds the bulkmove command for tests that run it as a
// separate process: as a user would, as the agent a push starts on the far
// side of an SSH connection, or as a `bulkmove serve` daemon.
//
// Build compiles ./cmd/bulkmove once per test binary, however many tests
// ask, and returns the path of the result. The binary sits alone in its
// directory, so a test may put that directory on a PATH. A failed build
// fails every test that asks, with the compiler's output.
//
// The directory outlives each test (the next one reuses the binary) and
// is removed when the test binary's tests have run: a package that calls
// Build wraps its TestMain's m with WithCleanup, and Build fails a test
// whose package does not, rather than leave binaries behind in the
// system's temporary directory.
//
// testbin is test support: only _test.go files import it. It imports
// nothing of the project (the build is a `go` command, not an import), so
// any package's tests may use it; it needs the go command on PATH, as
// `go test` does.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// pkg is the package Build builds, by import path so that it builds from
// any directory of the module.
const pkg = "github.com/bulkmove/bulkmove/cmd/bulkmove"

var (
	once    sync.Once
	dir     string // the directory the binary is in; "" until built
	bin     string
	failure string // why the build failed, with go build's output

	wrapped atomic.Bool // WithCleanup was called
)

// Build returns the path of a bulkmove binary built from this tree,
// building it on the first call.
func Build(t testing.TB) string {
	t.Helper()
	if !wrapped.Load() {
		t.Fatal("testbin.Build: the package's TestMain must run its tests through testbin.WithCleanup, which removes the binary at the end")
	}
	once.Do(build)
	if failure != "" {
		t.Fatal(failure)
	}
	return bin
}

func build() {
	d, err := os.MkdirTemp("", "bulkmove-bin-")
	if err != nil {
		failure = fmt.Sprintf("testbin: a directory for the binary: %v", err)
		return
	}
	dir = d
	bin = filepath.Join(d, "bulkmove")
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	// From bulkmove's own module, with its go.mod and go.sum, also for the
	// tests of a module of their own (deploy/k8stest) that replaces
	// bulkmove by this tree.
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) { // not under -trimpath
		cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		failure = fmt.Sprintf("testbin: go build %s: %v\n%s", pkg, err, out)
	}
}

// TestingM is what a TestMain's m offers, and what testscript.Main takes.
type TestingM interface {
	Run() int
}

// WithCleanup returns m with a Run that runs m's tests and then removes
// what Build built:
//
//	func TestMain(m *testing.M) { os.Exit(testbin.WithCleanup(m).Run()) }
//
// or, in a package whose TestMain hands m to testscript.Main, pass it
// testbin.WithCleanup(m) in place of m.
func WithCleanup(m TestingM) TestingM {
	wrapped.Store(true)
	return cleaning{m}
}

type cleaning struct{ m TestingM }

func (c cleaning) Run() int {
	code := c.m.Run()
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "testbin: removing the built binary: %v\n", err)
		}
	}
	return code
}
