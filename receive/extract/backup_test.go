package extract_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// replace writes a batch that gives each path new content ("new "+path)
// and returns its ack.
func replace(t *testing.T, r *extract.Receiver, id uint64, paths ...string) *wire.BatchAck {
	t.Helper()
	var entries []model.Entry
	for _, p := range paths {
		entries = append(entries, fileE(p, int64(len("new "+p))))
	}
	tx := r.Begin(entries)
	for i, p := range paths {
		if err := tx.Write(i, strings.NewReader("new "+p)); err != nil {
			t.Fatal(err)
		}
	}
	return tx.Commit(id, nil)
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBackupReplaced: a file given new content is moved aside, beside it
// with the suffix or under the backup directory, and the ack names it.
func TestBackupReplaced(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  extract.Options
		want string // where d/f's backup is, under the root
	}{
		{"suffix", extract.Options{Backup: true, Suffix: "~"}, "d/f~"},
		{"dir", extract.Options{Backup: true, BackupDir: "bak"}, "bak/d/f"},
		{"dir-suffix", extract.Options{Backup: true, BackupDir: "old/bak", Suffix: ".1"}, "old/bak/d/f.1"},
		{"named-temps", extract.Options{Backup: true, BackupDir: "bak", NamedTemps: true}, "bak/d/f"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t)
			mkTree(t, s.root, "d/f")
			r := s.open(t, c.opt)
			ack := replace(t, r, 1, "d/f", "new")
			if len(ack.Errors) != 0 {
				t.Fatal(ack.Errors)
			}
			if got := readFile(t, filepath.Join(s.root, "d/f")); got != "new d/f" {
				t.Errorf("d/f: %q", got)
			}
			if got := readFile(t, filepath.Join(s.root, c.want)); got != "d/f" {
				t.Errorf("%s: %q, want the old content", c.want, got)
			}
			if !slices.Equal(ack.Backups, []string{"d/f"}) || ack.BackedUp != 1 {
				t.Errorf("ack backups %q (%d), want [d/f]", ack.Backups, ack.BackedUp)
			}
			if got := r.BackupPath("d/f"); got != c.want {
				t.Errorf("BackupPath: %s, want %s", got, c.want)
			}
			s.check(t)
		})
	}
}

// TestBackupTypeChange: a tree in the way of a file has its files backed
// up (with Delete), and a file or symlink in the way of a directory is
// backed up too.
func TestBackupTypeChange(t *testing.T) {
	s := newSandbox(t)
	mkTree(t, s.root, "tree/sub/g", "tree/h", "f2d")
	if err := os.Symlink("nowhere", filepath.Join(s.root, "s2d")); err != nil {
		t.Fatal(err)
	}
	r := s.open(t, extract.Options{Delete: true, Backup: true, BackupDir: "bak"})
	ack := replace(t, r, 1, "tree", "f2d/x", "s2d/y")
	if len(ack.Errors) != 0 {
		t.Fatal(ack.Errors)
	}
	for p, want := range map[string]string{"bak/tree/sub/g": "tree/sub/g", "bak/tree/h": "tree/h", "bak/f2d": "f2d", "tree": "new tree"} {
		if got := readFile(t, filepath.Join(s.root, p)); got != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
	if l, err := os.Readlink(filepath.Join(s.root, "bak/s2d")); err != nil || l != "nowhere" {
		t.Errorf("bak/s2d: %q %v", l, err)
	}
	slices.Sort(ack.Backups)
	if want := []string{"f2d", "s2d", "tree/h", "tree/sub/g"}; !slices.Equal(ack.Backups, want) {
		t.Errorf("ack backups %q, want %q", ack.Backups, want)
	}
	s.check(t)
}

// TestBackupPrune: --delete moves files aside, removes the directories
// they leave empty (those holding backups beside their files stay), and
// never deletes the backup directory, relative or absolute beneath DEST.
func TestBackupPrune(t *testing.T) {
	for _, c := range []struct {
		name, dir, suffix string
		gone, kept        []string
	}{
		{"dir", "bak", "", []string{"old"}, []string{"bak/extra", "bak/old/a", "bak/old/deep/b", "bak/bak/prev"}},
		{"suffix", "", "~", nil, []string{"extra~", "old/a~", "old/deep/b~", "bak/bak/prev~"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t)
			mkTree(t, s.root, "keep", "extra", "old/a", "old/deep/b", "bak/bak/prev")
			r := s.open(t, extract.Options{Delete: true, Backup: true, BackupDir: c.dir, Suffix: c.suffix})
			rm, err := r.Prune(".", extract.NewKeep("keep"), nil, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range rm {
				if !x.IsDir && !x.Backup {
					t.Errorf("%s: removed, not backed up", x.Path)
				}
			}
			for _, p := range c.kept {
				if !exists(filepath.Join(s.root, p)) {
					t.Errorf("%s: gone", p)
				}
			}
			for _, p := range append(c.gone, "extra") {
				if exists(filepath.Join(s.root, p)) {
					t.Errorf("%s: still there", p)
				}
			}
		})
	}
	t.Run("absolute-beneath-dest", func(t *testing.T) {
		s := newSandbox(t)
		mkTree(t, s.root, "keep", "extra", "in/bak/prev")
		r := s.open(t, extract.Options{Delete: true, Backup: true, BackupDir: filepath.Join(s.root, "in/bak")})
		if _, err := r.Prune(".", extract.NewKeep("keep"), nil, false); err != nil {
			t.Fatal(err)
		}
		if !exists(filepath.Join(s.root, "in/bak/prev")) || !exists(filepath.Join(s.root, "in/bak/extra")) {
			t.Error("the backup directory was pruned, or extra not backed up into it")
		}
	})
}

// TestBackupDirSymlinkNotFollowed: a symlink a local user plants in the
// backup directory's path, before the run or while it runs (after the
// receiver opened the backup directory), is never followed: the entry
// whose backup would go through it fails, naming it, and stays as it was;
// nothing lands outside.
func TestBackupDirSymlinkNotFollowed(t *testing.T) {
	t.Run("planted-during-the-run", func(t *testing.T) {
		s := newSandbox(t)
		mkTree(t, s.root, "a", "d/f", "d/g", "keep")
		r := s.open(t, extract.Options{Delete: true, Backup: true, BackupDir: "bak"})
		if ack := replace(t, r, 1, "a"); len(ack.Errors) != 0 {
			t.Fatal(ack.Errors) // the backup directory is open now
		}
		if err := os.Symlink(s.outside, filepath.Join(s.root, "bak/d")); err != nil {
			t.Fatal(err)
		}
		ack := replace(t, r, 2, "d/f")
		if len(ack.Errors) != 1 || !strings.Contains(ack.Errors[0].Msg, "back up d/f to bak/d/f") || !strings.Contains(ack.Errors[0].Msg, "symlink") {
			t.Errorf("ack errors %v, want d/f's backup refused through a symlink", ack.Errors)
		}
		if got := readFile(t, filepath.Join(s.root, "d/f")); got != "d/f" {
			t.Errorf("d/f: %q: replaced without its backup", got)
		}
		// A prune the same.
		if _, err := r.Prune("d", extract.NewKeep("f"), nil, false); err == nil || !strings.Contains(err.Error(), "symlink") {
			t.Errorf("prune: %v, want the symlink refused", err)
		}
		if !exists(filepath.Join(s.root, "d/g")) {
			t.Error("d/g deleted without its backup")
		}
		ents, _ := os.ReadDir(s.outside)
		if len(ents) != 0 {
			t.Errorf("outside: %v", ents)
		}
	})
	t.Run("backup-dir-a-symlink", func(t *testing.T) {
		s := newSandbox(t)
		mkTree(t, s.root, "f")
		if err := os.Symlink(s.outside, filepath.Join(s.root, "bak")); err != nil {
			t.Fatal(err)
		}
		r := s.open(t, extract.Options{Backup: true, BackupDir: "bak"})
		ack := replace(t, r, 1, "f")
		if len(ack.Errors) != 1 || !strings.Contains(ack.Errors[0].Msg, "--backup-dir bak") {
			t.Errorf("ack errors %v, want the backup directory refused", ack.Errors)
		}
		ents, _ := os.ReadDir(s.outside)
		if len(ents) != 0 {
			t.Errorf("outside: %v", ents)
		}
	})
	t.Run("absolute-through-a-symlink", func(t *testing.T) {
		s := newSandbox(t)
		mkTree(t, s.root, "f")
		link := filepath.Join(s.base, "link")
		if err := os.Symlink(s.outside, link); err != nil {
			t.Fatal(err)
		}
		r := s.open(t, extract.Options{Backup: true, BackupDir: filepath.Join(link, "bak")})
		ack := replace(t, r, 1, "f")
		if len(ack.Errors) != 1 || !strings.Contains(ack.Errors[0].Msg, "symlink") {
			t.Errorf("ack errors %v, want the absolute backup directory refused for its symlink", ack.Errors)
		}
		ents, _ := os.ReadDir(s.outside)
		if len(ents) != 0 {
			t.Errorf("outside: %v", ents)
		}
	})
}

// TestBackupOtherFilesystem: a backup directory on another filesystem
// gets a copy (data, mode, mtime; a symlink's target), as rsync's does,
// and the original goes.
func TestBackupOtherFilesystem(t *testing.T) {
	s := newSandbox(t)
	var rootSt syscall.Stat_t
	if err := syscall.Stat(s.root, &rootSt); err != nil {
		t.Fatal(err)
	}
	var other string
	for _, c := range []string{"/dev/shm", "/tmp", "/var/tmp"} {
		var st syscall.Stat_t
		if syscall.Stat(c, &st) == nil && st.Dev != rootSt.Dev {
			if d, err := os.MkdirTemp(c, "bulkmove-backup-test"); err == nil {
				other = d
				break
			}
		}
	}
	if other == "" {
		t.Skip("no writable directory on another filesystem")
	}
	t.Cleanup(func() { os.RemoveAll(other) })
	mkTree(t, s.root, "d/f", "gone", "keep")
	os.Chmod(filepath.Join(s.root, "d/f"), 0o640)
	if err := os.Symlink("target", filepath.Join(s.root, "lnk")); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(s.root, "d/f"))
	r := s.open(t, extract.Options{Delete: true, Backup: true, BackupDir: other})
	if ack := replace(t, r, 1, "d/f"); len(ack.Errors) != 0 {
		t.Fatal(ack.Errors)
	}
	if _, err := r.Prune(".", extract.NewKeep("d", "keep"), nil, false); err != nil {
		t.Fatal(err)
	}
	bfi, err := os.Stat(filepath.Join(other, "d/f"))
	if err != nil || bfi.Mode() != fi.Mode() || !bfi.ModTime().Equal(fi.ModTime()) || readFile(t, filepath.Join(other, "d/f")) != "d/f" {
		t.Errorf("the copy: %v %v, want mode %v mtime %v and the old content", bfi, err, fi.Mode(), fi.ModTime())
	}
	if readFile(t, filepath.Join(other, "gone")) != "gone" || exists(filepath.Join(s.root, "gone")) {
		t.Error("gone: not copied aside and removed")
	}
	if l, err := os.Readlink(filepath.Join(other, "lnk")); err != nil || l != "target" || exists(filepath.Join(s.root, "lnk")) {
		t.Errorf("lnk: %q %v", l, err)
	}
	s.check(t)
}

// TestBackupOptionsChecked: whoever sends them, a relative backup
// directory stays beneath DEST, a suffix is part of a name, and an
// absolute backup directory is only what the receiver's policy allows.
func TestBackupOptionsChecked(t *testing.T) {
	s := newSandbox(t)
	for _, o := range []extract.Options{
		{Backup: true, BackupDir: "../up"},
		{Backup: true, BackupDir: "a/../../up"},
		{Backup: true, Suffix: "a/b"},
		{Backup: true},                 // beside the files with no suffix: the file itself
		{Backup: true, BackupDir: "."}, // the same
		{BackupDir: "bak"},             // without Backup
	} {
		if r, err := extract.Open(s.root, o); err == nil {
			r.Close()
			t.Errorf("%+v: opened", o)
		}
	}
	req := &wire.ReceiveOptions{Backup: true, BackupDir: "/elsewhere"}
	var pe *extract.PolicyError
	if _, _, err := (extract.Policy{}).Grant(req); !errors.As(err, &pe) || !strings.Contains(err.Error(), "--backup-dir /elsewhere") {
		t.Errorf("zero policy: %v, want the absolute backup directory refused", err)
	}
	if _, _, err := (extract.Policy{AbsBackupDir: "/other"}).Grant(req); err == nil {
		t.Error("a pull's policy granted another absolute backup directory than its own")
	}
	for _, p := range []extract.Policy{{AbsBackupDir: "/elsewhere/"}, {AbsBackupDir: extract.AnyBackupDir}, extract.AllowAll} {
		if o, _, err := p.Grant(req); err != nil || o.BackupDir != "/elsewhere" {
			t.Errorf("%+v: %v", p, err)
		}
	}
	if _, _, err := (extract.Policy{}).Grant(&wire.ReceiveOptions{Backup: true, BackupDir: "bak"}); err != nil {
		t.Errorf("a relative backup directory: %v", err)
	}
}
