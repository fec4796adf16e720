//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// logTree writes n log-like files of size bytes under dir/src.
func logTree(t *testing.T, dir string, n, size int) string {
	t.Helper()
	src := filepath.Join(dir, "src")
	for i := range n {
		var b strings.Builder
		for l := 0; b.Len() < size; l++ {
			fmt.Fprintf(&b, "%05d %03d GET /api/v1/items/%d 200 %dms user=%d\n", l, i, l*7919%10007, l%97, (l*31+i)%1000)
		}
		p := filepath.Join(src, fmt.Sprintf("d%d", i%4), fmt.Sprintf("f%03d.log", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(b.String()[:size]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// endEvent returns the end event of a --json run's output.
func endEvent(t *testing.T, out string) engine.EndEvent {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e engine.EndEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == "end" {
			return e
		}
	}
	t.Fatalf("no end event in:\n%s", out)
	return engine.EndEvent{}
}

// TestSSHCompress: over SSH, --compress zstd moves a tree of logs intact
// in a fraction of its bytes, and so does a pull (the remote sender
// compresses); auto compresses logs on a slow link (--bwlimit) and leaves
// random data plain, as the --json totals show.
func TestSSHCompress(t *testing.T) {
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src := logTree(t, dir, 64, 64<<10)

	out, code := runBM(t, nil, "--ssh-config", cfg, "-j", "2", "--compress=zstd:3", src, "box2:"+filepath.Join(dir, "zstd"))
	if code != 0 || !strings.Contains(out, "; compressed 4.0 MiB to ") {
		t.Fatalf("--compress zstd:3: exit %d:\n%s", code, out)
	}
	treecmp.Equal(t, src, filepath.Join(dir, "zstd"))

	out, code = runBM(t, nil, "--ssh-config", cfg, "-j", "2", "--compress=zstd", "box2:"+src, filepath.Join(dir, "pull"))
	if code != 0 {
		t.Fatalf("pull --compress zstd: exit %d:\n%s", code, out)
	}
	treecmp.Equal(t, src, filepath.Join(dir, "pull"))

	out, code = runBM(t, nil, "--ssh-config", cfg, "-j", "2", "--json", "-v", "--batch-size", "512KiB", "--bwlimit", "2M", src, "box2:"+filepath.Join(dir, "auto"))
	e := endEvent(t, out)
	t.Logf("auto, logs at 2M: %d bytes of files, %d on the wire; compressed %d to %d", e.Bytes, e.WireBytes, e.CompressedIn, e.CompressedOut)
	if code != 0 || e.CompressedIn == 0 || e.WireBytes > e.Bytes/2 || !strings.Contains(out, "compression on") {
		t.Fatalf("auto on a slow link: exit %d, %d bytes on the wire for %d of files:\n%s", code, e.WireBytes, e.Bytes, out)
	}
	treecmp.Equal(t, src, filepath.Join(dir, "auto"))

	rnd := randomTree(t, filepath.Join(dir, "r"), 8, 256<<10)
	out, code = runBM(t, nil, "--ssh-config", cfg, "-j", "2", "--json", "--batch-size", "512KiB", "--bwlimit", "2M", rnd, "box2:"+filepath.Join(dir, "random"))
	e = endEvent(t, out)
	if code != 0 || e.CompressedIn != 0 || e.WireBytes < e.Bytes {
		t.Fatalf("auto, random data: exit %d, compressed %d bytes, %d on the wire for %d of files:\n%s", code, e.CompressedIn, e.WireBytes, e.Bytes, out)
	}
	treecmp.Equal(t, rnd, filepath.Join(dir, "random"))
}
