package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// TestSoak pushes a mixed tree over a real sshd through a fault proxy,
// BULKMOVE_SOAK_RUNS times (default 3; `make soak` runs 20), each time
// injecting faults at random points (seeded: BULKMOVE_SOAK_SEED, printed):
// every connection cut or reset, the network stalled, slowed, or the agent
// killed. Each run is repeated until it succeeds (the journal resumes it),
// and then the copy must equal the source.
func TestSoak(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("soak: not with -short")
	}
	runs := 3
	if s := os.Getenv("BULKMOVE_SOAK_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BULKMOVE_SOAK_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("soak: %d runs, seed %d (BULKMOVE_SOAK_SEED=%d to repeat)", runs, seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	bin, cfg, px := sshdBehindProxy(t)
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	if err := gentree.Mixed(src, 2500, seed); err != nil {
		t.Fatal(err)
	}
	faultNames := []string{"cut", "reset", "stall", "slow", "kill agent"}
	var faults, resumes int
	tally := map[string]int{}
	for run := 1; run <= runs; run++ {
		dst := filepath.Join(dir, fmt.Sprintf("dst%d", run))
		env := []string{"XDG_STATE_HOME=" + filepath.Join(dir, fmt.Sprintf("state%d", run))}
		for attempt := 1; ; attempt++ {
			if attempt > 20 {
				t.Fatalf("run %d: no success after 20 attempts", run)
			}
			// Half the attempts give up on a lost stream at once, so
			// that the next attempt must resume from the journal.
			reconnect := "30s"
			if rng.IntN(2) == 0 {
				reconnect = "0"
			}
			px.Slow(time.Duration(rng.IntN(3)) * time.Millisecond)
			cmd := exec.Command(bin, "--ssh-config", cfg, "--port", strconv.Itoa(px.Port()), "-j", "3", "--batch-files", "100",
				"--stall-timeout", "2s", "--reconnect-timeout", reconnect, src, "box2:"+dst)
			cmd.Env = append(os.Environ(), env...)
			var out strings.Builder
			cmd.Stderr = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var werr error
			if attempt <= 3 { // the first attempts get a fault each
				select {
				case werr = <-done:
				case <-time.After(time.Duration(50+rng.IntN(600)) * time.Millisecond):
					f := faultNames[rng.IntN(len(faultNames))]
					faults++
					tally[f]++
					switch f {
					case "cut":
						px.CutAll()
					case "reset":
						px.Reset(true)
						px.CutAll()
						px.Reset(false)
					case "stall":
						px.Stall(true)
						time.Sleep(2500 * time.Millisecond)
						px.Stall(false)
					case "slow":
						px.Slow(5 * time.Millisecond)
					case "kill agent":
						exec.Command("pkill", "-9", "-f", "--", "--hub 3 -- "+dst).Run()
					}
					werr = <-done
				}
			} else {
				werr = <-done
			}
			px.Slow(0)
			if werr == nil {
				break
			}
			resumes++
			if ee, ok := werr.(*exec.ExitError); !ok || ee.ExitCode() != exitFatal && ee.ExitCode() != exitPartial {
				t.Fatalf("run %d attempt %d: %v, want exit 3 (or 2) after a fault:\n%s", run, attempt, werr, out.String())
			}
		}
		// Nothing lost, nothing corrupted.
		treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
	}
	t.Logf("soak: %d runs, %d faults injected (%v), %d resumes needed, 0 files lost or corrupted", runs, faults, tally, resumes)
}
