package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// The long tests that run bulkmove as processes of their own over sshd,
// proxies and rate limits, each in its own directories, call t.Parallel:
// mostly waiting, they run two at a time (-parallel is GOMAXPROCS) once
// the others are done. Tests that time a run or change the process's
// environment stay serial; one that measures a bulkmove's peak RSS (its
// own, from wait4) and times nothing may run beside them.
func TestMain(m *testing.M) {
	// Resume journals of test runs go to a throwaway state directory
	// (left in the system's temporary directory: testscript.Main exits).
	if os.Getenv("BULKMOVE_TEST_STATE") == "" {
		d, err := os.MkdirTemp("", "bulkmove-test-state-")
		if err == nil {
			os.Setenv("XDG_STATE_HOME", d)
			os.Setenv("BULKMOVE_TEST_STATE", d)
		}
	}
	// The bulkmove that testbin.Build makes for the tests that run it as
	// a process of its own goes when the tests end.
	testscript.Main(testbin.WithCleanup(m), map[string]func(){
		"bulkmove":        func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
		"bulkmove-maxrss": func() { os.Exit(maxRSSMain(os.Args[1:])) },
	})
}

// TestScripts runs the CLI end-to-end tests in testdata/script: each
// reads like a terminal session.
func TestScripts(t *testing.T) {
	root := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		// Thousands of creates per script: a tmpfs keeps them fast.
		if d, err := os.MkdirTemp("/dev/shm", "bulkmove-script-"); err == nil {
			root = d
			t.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		WorkdirRoot:         root,
		RequireExplicitExec: false,
		Setup: func(env *testscript.Env) error {
			env.Setenv("XDG_STATE_HOME", env.WorkDir+"/.state")
			env.Setenv("BULKMOVE_TEST_STATE", env.WorkDir+"/.state") // TestMain: leave it
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"treecmp":      cmdTreecmp,
			"gentree":      cmdGentree,
			"hardlink":     cmdHardlink,
			"mkfifo":       cmdMkfifo,
			"mknod":        cmdMknod,
			"fakestat":     cmdFakestat,
			"mtime":        cmdMtime,
			"oddnames":     cmdOddnames,
			"count":        cmdCount,
			"waitcount":    cmdWaitcount,
			"sleep":        cmdSleep,
			"truncate":     cmdTruncate,
			"exits":        cmdExits,
			"hostilenames": cmdHostilenames,
			"termclean":    cmdTermclean,
		},
	})
}

// treecmp [-extra] [-nodirtimes] SRC DST: the trees are equal in
// content, modes, mtimes (of directories too unless -nodirtimes),
// symlinks, hard links and empty directories.
func cmdTreecmp(ts *testscript.TestScript, neg bool, args []string) {
	var opt treecmp.Options
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-extra":
			opt.AllowExtra = true
		case "-nodirtimes":
			opt.IgnoreDirMtime = true
		default:
			ts.Fatalf("treecmp: unknown flag %s", args[0])
		}
		args = args[1:]
	}
	opt.Owner = os.Geteuid() == 0
	if len(args) != 2 {
		ts.Fatalf("usage: treecmp [-extra] [-nodirtimes] SRC DST")
	}
	diffs, err := treecmp.Compare(ts.MkAbs(args[0]), ts.MkAbs(args[1]), opt)
	ts.Check(err)
	if neg {
		if len(diffs) == 0 {
			ts.Fatalf("trees are equal, want a difference")
		}
		return
	}
	if len(diffs) > 0 {
		ts.Fatalf("trees differ:\n%s", treecmp.Format(diffs, 20))
	}
}

// gentree small|mixed|snapshots N DIR
func cmdGentree(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: gentree small|mixed|snapshots N DIR")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	dir := ts.MkAbs(args[2])
	switch args[0] {
	case "small":
		ts.Check(gentree.Small(dir, n, max(1, n/100), 1024))
	case "mixed":
		ts.Check(gentree.Mixed(dir, n, 1))
	case "snapshots":
		ts.Check(gentree.Snapshots(dir, n))
	default:
		ts.Fatalf("unknown tree kind %q", args[0])
	}
}

// hardlink OLD NEW
func cmdHardlink(ts *testscript.TestScript, neg bool, args []string) {
	ts.Check(os.Link(ts.MkAbs(args[0]), ts.MkAbs(args[1])))
}

// mkfifo PATH
func cmdMkfifo(ts *testscript.TestScript, neg bool, args []string) {
	ts.Check(syscall.Mkfifo(ts.MkAbs(args[0]), 0o644))
}

// mknod PATH c|b MAJOR MINOR: a character or block device (as root).
func cmdMknod(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 4 || args[1] != "c" && args[1] != "b" {
		ts.Fatalf("usage: mknod PATH c|b MAJOR MINOR")
	}
	major, err := strconv.ParseUint(args[2], 10, 32)
	ts.Check(err)
	minor, err := strconv.ParseUint(args[3], 10, 32)
	ts.Check(err)
	typ := uint32(unix.S_IFCHR)
	if args[1] == "b" {
		typ = unix.S_IFBLK
	}
	ts.Check(unix.Mknod(ts.MkAbs(args[0]), typ|0o644, int(unix.Mkdev(uint32(major), uint32(minor)))))
}

// fakestat DIR: prints, sorted by path, each entry under DIR that has a
// user.rsync.%stat attribute (--fake-super's) and its value: "PATH VALUE"
// (the root as ".").
func cmdFakestat(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: fakestat DIR")
	}
	lines, err := fakeStats(ts.MkAbs(args[0]))
	ts.Check(err)
	for _, l := range lines {
		fmt.Fprintln(ts.Stdout(), l)
	}
}

// fakeStats lists, sorted, each entry under root with a
// user.rsync.%stat attribute: "PATH VALUE", the root as ".".
func fakeStats(root string) ([]string, error) {
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		buf := make([]byte, 256)
		n, err := unix.Lgetxattr(p, "user.rsync.%stat", buf)
		if err == unix.ENODATA {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		rel, _ := filepath.Rel(root, p)
		lines = append(lines, rel+" "+string(buf[:n]))
		return nil
	})
	slices.Sort(lines)
	return lines, err
}

// mtime PATH RFC3339NANO: set a modification time.
func cmdMtime(ts *testscript.TestScript, neg bool, args []string) {
	tm, err := time.Parse(time.RFC3339Nano, args[1])
	ts.Check(err)
	ts.Check(os.Chtimes(ts.MkAbs(args[0]), tm, tm))
}

// oddnames DIR: names with spaces, newlines, non-UTF-8 bytes, 255-byte
// components and paths over 100 characters.
func cmdOddnames(ts *testscript.TestScript, neg bool, args []string) {
	dir := ts.MkAbs(args[0])
	long := strings.Repeat("L", 255)
	deep := filepath.Join(dir, strings.Repeat("deep-directory-name/", 8))
	ts.Check(os.MkdirAll(deep, 0o755))
	for _, p := range []string{
		filepath.Join(dir, "with space"),
		filepath.Join(dir, "new\nline"),
		filepath.Join(dir, "bad\xff\xfeutf8"),
		filepath.Join(dir, long),
		filepath.Join(deep, long),
		filepath.Join(dir, "tab\there"),
	} {
		ts.Check(os.WriteFile(p, []byte(p), 0o644))
	}
}

// count N DIR: DIR holds N regular files (recursively).
func cmdCount(ts *testscript.TestScript, neg bool, args []string) {
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	n, err := regularFiles(ts.MkAbs(args[1]))
	ts.Check(err)
	if (n == want) == neg {
		ts.Fatalf("%d regular files, want %d", n, want)
	}
}

// regularFiles counts the regular files under dir.
func regularFiles(dir string) (int, error) {
	n := 0
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n++
		}
		return err
	})
	return n, err
}

// waitcount N DIR: wait (20 s at most) until DIR holds at least N regular
// files: a script interrupts a run once it has got somewhere, however
// slow a loaded machine makes its start, rather than after a fixed sleep.
func cmdWaitcount(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitcount N DIR")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	n := 0
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		// (An error is DIR not made yet, or a file renamed meanwhile.)
		if n, _ = regularFiles(ts.MkAbs(args[1])); n >= want {
			return
		}
	}
	ts.Fatalf("%s holds %d regular files after 20 s, want at least %d", args[1], n, want)
}

// truncate PATH SIZE: cut (or extend) a file to SIZE bytes, keeping its
// modification time, as a damaged copy may keep it.
func cmdTruncate(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: truncate PATH SIZE")
	}
	p := ts.MkAbs(args[0])
	size, err := strconv.ParseInt(args[1], 10, 64)
	ts.Check(err)
	fi, err := os.Stat(p)
	ts.Check(err)
	ts.Check(os.Truncate(p, size))
	ts.Check(os.Chtimes(p, fi.ModTime(), fi.ModTime()))
}

// exits CODE PROG [ARGS...]: PROG exits with CODE (stdout and stderr
// are kept for the next stdout and stderr commands).
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: exits CODE PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if (got == want) == neg {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// sleep DURATION
func cmdSleep(ts *testscript.TestScript, neg bool, args []string) {
	d, err := time.ParseDuration(args[0])
	ts.Check(err)
	time.Sleep(d)
}
