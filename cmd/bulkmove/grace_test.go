//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// TestLocalGrace: a local move slowed by --bwlimit, sent SIGTERM, stops
// once --grace is over, not when the batches in flight have crawled to
// their end; what it leaves at DEST is whole (each file there equals
// SRC's: nothing half-written under its name), and the same command run
// again finishes the copy.
func TestLocalGrace(t *testing.T) {
	bin := testbin.Build(t)
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(src, 0o755)
	for i := range 24 {
		b := bytes.Repeat([]byte{byte('a' + i)}, 1<<20)
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%02d", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--bwlimit", "1M", "--grace", "1s", "-j", "2", "--batch-files", "6", src, dst}
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	cmd.Process.Signal(syscall.SIGTERM)
	start := time.Now()
	err := cmd.Wait()
	took := time.Since(start)
	// At 1 MiB/s, the batches in flight (2 streams of 6 MiB, 2 MiB of
	// them sent) would take 10 s more; --grace 1s, and the rest of 6 s
	// for a loaded machine to end the process.
	if took > 6*time.Second {
		t.Errorf("stopped %.1fs after SIGTERM with --grace 1s:\n%s", took.Seconds(), out.String())
	}
	if code := exitOf(t, err); code == 0 {
		t.Errorf("exit 0 after an interrupted move:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "interrupted") {
		t.Errorf("no word of the interruption:\n%s", out.String())
	}
	ents, _ := os.ReadDir(dst)
	whole := 0
	for _, e := range ents {
		got, err := os.ReadFile(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Errorf("DEST holds %s, which is not at SRC (a temporary name left behind?)", e.Name())
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s at DEST is %d bytes, not SRC's whole %d", e.Name(), len(got), len(want))
		}
		whole++
	}
	if whole == len(ents) && whole >= 24 {
		t.Errorf("every file was moved before the stop: the test did not interrupt anything")
	}
	if o, code := runBM(t, nil, args[4:]...); code != 0 {
		t.Fatalf("the run again: exit %d:\n%s", code, o)
	}
	treecmp.Equal(t, src, dst)
}
