package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestServeDevices: a push with -D to a serve without --allow-devices is
// refused at its start, naming -D and serve --allow-devices, and nothing
// lands; a push with --specials alone is taken, its FIFO made. A serve
// run as root with --allow-devices makes the device, with its number.
func TestServeDevices(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making devices needs root")
	}
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644)
	if err := unix.Mknod(filepath.Join(src, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(src, "pipe"), 0o640); err != nil {
		t.Fatal(err)
	}

	root := filepath.Join(dir, "root")
	p := startServeProc(t, dir, nil, "data="+root)
	out, code := runBM(t, nil, "-D", "--token-file", p.tok, "--fingerprint", p.fp, src, "bulkmove://"+p.addr+"/data/x")
	if code != exitFatal || !strings.Contains(out, "refused: the sender asks for -D (devices), which this receiver does not allow (serve --allow-devices)") {
		t.Errorf("-D to a serve without --allow-devices: exit %d, want 3 and the refusal:\n%s", code, out)
	}
	if _, err := os.Lstat(filepath.Join(root, "x/null")); err == nil {
		t.Errorf("refused, yet the device landed")
	}
	out, code = runBM(t, nil, "--specials", "--token-file", p.tok, "--fingerprint", p.fp, src, "bulkmove://"+p.addr+"/data/y")
	if fi, err := os.Lstat(filepath.Join(root, "y/pipe")); code != 0 || err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("--specials to a serve: exit %d, pipe %v %v; want 0 and the FIFO:\n%s", code, fi, err, out)
	}
	if _, err := os.Lstat(filepath.Join(root, "y/null")); err == nil || !strings.Contains(out, "skipping device (use -D to copy devices)") {
		t.Errorf("--specials: the device landed (%v), or no warning:\n%s", err, out)
	}

	dir2 := shmDir(t)
	root2 := filepath.Join(dir2, "root")
	p2 := startServeProc(t, dir2, []string{"--allow-devices"}, "data="+root2)
	out, code = runBM(t, nil, "-D", "--token-file", p2.tok, "--fingerprint", p2.fp, src, "bulkmove://"+p2.addr+"/data/x")
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(root2, "x/null"), &st); code != 0 || err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(1, 3) {
		t.Errorf("-D to a serve with --allow-devices: exit %d, %v, mode %#o rdev %#x; want 0 and the device 1:3:\n%s", code, err, st.Mode, st.Rdev, out)
	}
}
