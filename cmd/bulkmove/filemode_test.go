package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestFileModes: under umask 022, the files a job writes have the modes
// docs/observability.md gives: --log-file, the resume journal, plan parts and
// summary.txt and a CPU profile 0600 (they name the files of the tree, or
// are the user's alone), the plan's and the journal's new directories 0700,
// --metrics-textfile 0644 (node_exporter, another user, reads it); a log
// or textfile that exists keeps its narrower mode.
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	mode := func(path string, want os.FileMode) {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Error(err)
			return
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", filepath.Base(path), got, want)
		}
	}

	// A job while it runs: its journal is kept until the end.
	log, prom := filepath.Join(dir, "job.log"), filepath.Join(dir, "job.prom")
	journal := filepath.Join(dir, "state", "job.journal")
	startControlJob(t, "--metrics-addr", "127.0.0.1:0", "--journal", journal, "--log-file", log,
		"--metrics-textfile", prom, "--metrics-textfile-interval", "100ms")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(prom); err == nil {
			break
		}
	}
	mode(log, 0o600)
	mode(prom, 0o644)
	mode(journal, 0o600)
	mode(filepath.Dir(journal), 0o700)

	// Files that exist, narrower than bulkmove would make them.
	src := randomTree(t, dir, 2, 100)
	log2, prom2 := filepath.Join(dir, "shared.log"), filepath.Join(dir, "shared.prom")
	for _, f := range []string{log2, prom2} {
		os.WriteFile(f, nil, 0o640)
		os.Chmod(f, 0o640)
	}
	var stderr bytes.Buffer
	if code := run([]string{"--journal", "none", "--log-file", log2, "--metrics-textfile", prom2, src, filepath.Join(dir, "dst")}, nil, io.Discard, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	mode(log2, 0o640)
	mode(prom2, 0o640)

	// bulkmove plan.
	out := filepath.Join(dir, "plan")
	if code := run([]string{"plan", src, "--parts", "2", "-o", out}, nil, io.Discard, &stderr); code != exitOK {
		t.Fatalf("plan: exit %d: %s", code, stderr.String())
	}
	mode(out, 0o700)
	for _, f := range []string{"part-0001", "part-0002", "summary.txt"} {
		mode(filepath.Join(out, f), 0o600)
	}

	// BULKMOVE_TUNE_CPUPROFILE.
	profile := filepath.Join(dir, "cpu.pprof")
	if out, code := runBM(t, []string{"BULKMOVE_TUNE_CPUPROFILE=" + profile}, "--journal", "none", src, filepath.Join(dir, "dst2")); code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	mode(profile, 0o600)
}
