//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
)

// TestSSHJSONEvents checks the --json events of the built bulkmove over
// SSH against docs/events.schema.json: a push, a pull (whose end event
// carries the exit code the process exits with) and a pull of a SRC the
// remote host lacks (its end event, the error too).
func TestSSHJSONEvents(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	for _, n := range []string{"a", "sub/b"} {
		os.WriteFile(filepath.Join(src, n), []byte(n), 0o644)
	}
	for _, c := range []struct {
		name  string
		args  []string
		code  int
		first string // the first event's type
		error string
	}{
		{"push", []string{src, "box2:" + filepath.Join(dir, "pushed")}, exitOK, "start", ""},
		{"pull", []string{"box2:" + src, filepath.Join(dir, "pulled")}, exitOK, "end", ""},
		{"pull of a missing SRC", []string{"box2:" + filepath.Join(dir, "nowhere"), filepath.Join(dir, "p2")}, exitFatal, "end", "pull from box2: the remote sender exited with status 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, append([]string{"--ssh-config", cfg, "-j", "2", "--json"}, c.args...)...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			code := exitOf(t, cmd.Run())
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s", code, c.code, stderr.String())
			}
			evs := schemaEvents(t, stdout.Bytes())
			if len(evs) == 0 || evs[0]["type"] != c.first || evs[len(evs)-1]["type"] != "end" {
				t.Fatalf("events:\n%s\nwant %s first, end last", stdout.String(), c.first)
			}
			end := evs[len(evs)-1]
			msg, _ := end["error"].(string)
			if end["exit_code"] != float64(code) || !strings.Contains(msg, c.error) || c.error == "" && msg != "" {
				t.Errorf("end event %v: want exit_code %d, error %q", end, code, c.error)
			}
		})
	}
}
