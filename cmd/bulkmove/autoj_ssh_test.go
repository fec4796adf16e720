package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// TestAutoJSSH: -j auto over SSH, where each connection is slow on its
// own (the proxy delays every 32 KiB chunk, as a long path's window
// does) and the CPUs are idle, grows beyond the 4 streams it starts with;
// its decisions are in the log and the JSON events, and the tree lands.
// On a host of fewer than 4 CPUs it dials as many connections as CPUs (at
// least 2), not 4: a connection costs a handshake and a login at the far
// end even when the job does not keep it. The SSH round trip, through
// the proxy, is a far path's: the first step follows at once, to twice 4.
func TestAutoJSSH(t *testing.T) {
	_, cfg, px := sshdBehindProxy(t)
	px.Slow(15 * time.Millisecond) // about 2 MiB/s a connection
	dir := shmDir(t)
	src := randomTree(t, dir, 300, 256<<10) // 75 MiB: about 9 s at 4 streams
	dst := filepath.Join(dir, "dst")
	start := time.Now()
	// A tail of 1 s: by the default of 5 s, a job of this size can look
	// like its tail in the first window, while buffers fill (and did,
	// on a loaded machine).
	out, code := runBM(t, []string{"BULKMOVE_TUNE_AUTO_TAIL=1"}, "--ssh-config", cfg, "--port", strconv.Itoa(px.Port()), "--json", "-v", "--compress=none",
		"--journal", "none", "--batch-size", "2MiB", "--max-streams", "12", src, "box2:"+dst)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	t.Logf("%.1fs", time.Since(start).Seconds())
	most, started := 0, 0
	var log []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, " auto: ") {
			log = append(log, line)
		}
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var ev struct {
			Type    string          `json:"type"`
			Streams json.RawMessage `json:"streams"` // a number in start, a list in end
			To      int             `json:"to"`
			Action  string          `json:"action"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		switch ev.Type {
		case "start":
			started, _ = strconv.Atoi(string(ev.Streams))
		case "streams":
			most = max(most, ev.To)
		}
	}
	t.Logf("decisions:\n%s", strings.Join(log, "\n"))
	dialed := min(4, max(2, runtime.NumCPU()))
	if started != dialed || !strings.Contains(out, fmt.Sprintf("first of %d SSH connections open", dialed)) {
		t.Errorf("started with %d streams, want %d, and %d connections dialed:\n%s", started, dialed, dialed, out)
	}
	if strings.Contains(out, "a near path") {
		t.Errorf("streams dialed beyond the CPUs and dropped (a near path's decision):\n%s", out)
	}
	// Each SSH round trip through the proxy is long: the first step is
	// taken as soon as the streams run, without a window measured first.
	if !strings.Contains(strings.Join(log, "\n"), "streams: a far path (round trip") {
		t.Errorf("no first step for a far path in the decisions:\n%s", strings.Join(log, "\n"))
	}
	if most <= 4 || len(log) == 0 {
		t.Errorf("grew to %d streams, want more than 4, and the decisions in the log (-v):\n%s", most, out)
	}
	if !strings.Contains(out, "bulkmove: 300 files, 75 MiB") {
		t.Errorf("not all moved:\n%s", out)
	}
	treecmp.Equal(t, src, dst)
}

// TestAutoJRoundTripBeforeData: -j auto measures the SSH round trip as
// the connections open, before the data flows. A keepalive sent once the
// streams run waits behind their data (and, on a busy host, behind the
// CPUs): over the rig's direct link, with the small files' copy on its
// two saturated cores, it took 17 ms, and -j auto took a far path's first
// step on a near path. Here the proxy to the sshd turns slow (30 ms a
// chunk) once the agent has answered: measured then, the round trip looks
// far; measured as the connections opened, it is loopback's.
func TestAutoJRoundTripBeforeData(t *testing.T) {
	_, cfg, px := sshdBehindProxy(t)
	dir := shmDir(t)
	src := randomTree(t, dir, 20, 32<<10)
	dst := filepath.Join(dir, "dst")
	cmd := exec.Command(testbin.Build(t), "--ssh-config", cfg, "--port", strconv.Itoa(px.Port()), "-v", "--compress=none",
		"--journal", "none", src, "box2:"+dst)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if strings.Contains(line, " ready on box2") {
			px.Slow(30 * time.Millisecond) // the agent has answered
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), " ready on box2") {
		t.Fatalf("no agent ready in the log:\n%s", out.String())
	}
	if strings.Contains(out.String(), "a far path") {
		t.Errorf("-j auto took a far path's step over loopback, the round trip measured behind slowed data:\n%s", out.String())
	}
	treecmp.Equal(t, src, dst)
}
