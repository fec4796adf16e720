package extract_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

func nodeE(p string, k model.Kind, mode fs.FileMode, rdev uint64) model.Entry {
	return model.Entry{Path: p, Kind: k, Mode: mode, MTime: mtime, UID: 1234, GID: 5678, Rdev: rdev}
}

// applyFinal applies entries as a final batch and returns its ack.
func applyFinal(r *extract.Receiver, entries []model.Entry) *wire.BatchAck {
	tx := r.Begin(entries)
	tx.ApplyFinal()
	return tx.Commit(1, nil)
}

// items maps each entry's path to its item flags in ack.
func items(entries []model.Entry, ack *wire.BatchAck) map[string]uint16 {
	m := map[string]uint16{}
	for _, it := range ack.Items {
		m[entries[it.Index].Path] = it.Flags
	}
	return m
}

// checkNode fails unless p under root is the node e describes: its type,
// device number, mode (without setuid bits), owner and mtime.
func checkNode(t *testing.T, root string, e model.Entry) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(root, e.Path), &st); err != nil {
		t.Errorf("%s: %v", e.Path, err)
		return st
	}
	typ := map[model.Kind]uint32{model.KindCharDevice: unix.S_IFCHR, model.KindBlockDevice: unix.S_IFBLK,
		model.KindFIFO: unix.S_IFIFO, model.KindSocket: unix.S_IFSOCK}[e.Kind]
	want := uint32(e.Mode.Perm())
	if e.Mode&fs.ModeSticky != 0 {
		want |= unix.S_ISVTX
	}
	if st.Mode&unix.S_IFMT != typ || st.Mode&0o7777 != want || st.Mtim.Nano() != e.MTime || st.Uid != e.UID || st.Gid != e.GID ||
		e.Kind.IsDevice() && st.Rdev != unix.Mkdev(e.Major(), e.Minor()) {
		t.Errorf("%s: mode %#o rdev %d:%d owner %d:%d mtime %d; want type %#o, mode %#o, %d:%d, %d:%d, %d", e.Path,
			st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev), st.Uid, st.Gid, st.Mtim.Nano(), typ, want, e.Major(), e.Minor(), e.UID, e.GID, e.MTime)
	}
	return st
}

// TestApplySpecialFiles: devices, a FIFO and a socket are made with their
// type, number, mode (setuid bits dropped without KeepSetid), owner and
// mtime, a symlink in the way replaced, not followed; a second pass
// leaves them (same inodes, nothing itemized); a device whose number
// changed is made again, a node whose mode changed only gets the mode;
// --ignore-existing leaves a node of the type there; verify finds them
// the same, and names a changed device number.
func TestApplySpecialFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making devices and giving them away needs root")
	}
	s := newSandbox(t)
	if err := os.Symlink(s.outside, filepath.Join(s.root, "null")); err != nil {
		t.Fatal(err)
	}
	r := s.open(t, extract.Options{Devices: true, Specials: true, Owner: true, Itemize: true})
	entries := []model.Entry{
		nodeE("null", model.KindCharDevice, 0o666, model.Mkdev(1, 3)),
		nodeE("d/loop", model.KindBlockDevice, 0o640, model.Mkdev(7, 1<<20-1)),
		nodeE("pipe", model.KindFIFO, 0o620|fs.ModeSetuid, 0),
		nodeE("sock", model.KindSocket, 0o755|fs.ModeSticky, 0),
	}
	if err := os.Mkdir(filepath.Join(s.root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	ack := applyFinal(r, entries)
	if len(ack.Errors) > 0 || ack.Files != 4 {
		t.Fatalf("ack: %d made, errors %v", ack.Files, ack.Errors)
	}
	want := entries[2]
	want.Mode &^= fs.ModeSetuid
	got := map[string]unix.Stat_t{}
	for i, e := range entries {
		if i == 2 {
			e = want
		}
		got[e.Path] = checkNode(t, s.root, e)
	}
	for p, f := range items(entries, ack) {
		if f != wire.ItemNew {
			t.Errorf("%s: items %#x, want new", p, f)
		}
	}
	s.check(t) // the symlink to outside was replaced, not followed

	ack = applyFinal(r, entries)
	if len(ack.Errors) > 0 || ack.Files != 0 || ack.Skipped != 4 || len(ack.Items) > 0 {
		t.Errorf("second pass: %d made, %d up to date, items %v, errors %v; want all 4 up to date", ack.Files, ack.Skipped, ack.Items, ack.Errors)
	}
	for _, e := range entries {
		var st unix.Stat_t
		unix.Lstat(filepath.Join(s.root, e.Path), &st)
		if st.Ino != got[e.Path].Ino {
			t.Errorf("%s made again on a pass that changed nothing", e.Path)
		}
	}
	if diffs := r.Verify(entries, nil); len(diffs) > 0 {
		t.Errorf("verify: %v", diffs)
	}

	changed := append([]model.Entry(nil), entries...)
	changed[0].Rdev = model.Mkdev(1, 5)
	changed[1].Mode = 0o600
	if diffs := r.Verify(changed, nil); len(diffs) != 2 || !strings.Contains(diffs[0].Msg+diffs[1].Msg, "device number: source 1:5, destination 1:3") {
		t.Errorf("verify of a changed number and mode: %v", diffs)
	}
	ack = applyFinal(r, changed)
	it := items(changed, ack)
	if len(ack.Errors) > 0 || it["null"] != wire.ItemContent || it["d/loop"] != wire.ItemPerms {
		t.Errorf("changed: items %v, errors %v; want null's content, d/loop's permissions", it, ack.Errors)
	}
	if st := checkNode(t, s.root, changed[0]); st.Ino == got["null"].Ino {
		t.Errorf("null, its number changed, was not made again")
	}
	if st := checkNode(t, s.root, changed[1]); st.Ino != got["d/loop"].Ino {
		t.Errorf("d/loop, only its mode changed, was made again")
	}

	ri := s.open(t, extract.Options{Devices: true, Specials: true, Owner: true, Check: wire.CheckExisting})
	ack = applyFinal(ri, entries)
	if len(ack.Errors) > 0 || ack.Skipped != 4 {
		t.Errorf("--ignore-existing: %d up to date, errors %v", ack.Skipped, ack.Errors)
	}
	checkNode(t, s.root, changed[0]) // left as it is
	s.check(t)
}

// TestSpecialFilesRefused: a device or a special file the job did not
// ask for (or its receiver's policy did not grant) is refused by name,
// nothing made; a receiver without CAP_MKNOD refuses each device, saying
// it is not root, and still makes FIFOs.
func TestSpecialFilesRefused(t *testing.T) {
	entries := []model.Entry{
		nodeE("mem", model.KindCharDevice, 0o666, model.Mkdev(1, 1)),
		nodeE("pipe", model.KindFIFO, 0o644, 0),
		nodeE("big", model.KindBlockDevice, 0o600, model.Mkdev(1<<12, 0)),
	}
	entries[1].UID, entries[1].GID = uint32(os.Geteuid()), uint32(os.Getegid())
	for _, tc := range []struct {
		name    string
		opt     extract.Options
		noMknod bool
		root    bool              // needs root
		errs    map[string]string // path: what its error says
		codes   map[string]int
	}{
		{name: "not asked", errs: map[string]string{"mem": `refusing character device "mem": devices were not asked for (-D)`,
			"pipe": `refusing FIFO "pipe": special files were not asked for (-D)`, "big": `refusing block device "big"`},
			codes: map[string]int{"mem": wire.CodeInvalid, "pipe": wire.CodeInvalid, "big": wire.CodeInvalid}},
		{name: "not root", opt: extract.Options{Devices: true, Specials: true}, noMknod: true,
			errs: map[string]string{"mem": "create character device mem: not root: only root (CAP_MKNOD) may make devices",
				"big": "create block device big: not root"},
			codes: map[string]int{"mem": wire.CodePerm, "big": wire.CodePerm}},
		{name: "a number beyond this system's", opt: extract.Options{Devices: true, Specials: true}, root: true,
			errs:  map[string]string{"big": "create block device big: device 4096:0: numbers beyond 4095:1048575 cannot be made here"},
			codes: map[string]int{"big": wire.CodeOther}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("making devices needs root")
			}
			if tc.noMknod {
				defer extract.SetCanMknod(false)()
			}
			s := newSandbox(t)
			r := s.open(t, tc.opt)
			ack := applyFinal(r, entries)
			got := map[string]string{}
			for _, e := range ack.Errors {
				p := entries[e.Index].Path
				got[p] = e.Msg
				if e.Code != tc.codes[p] {
					t.Errorf("%s: code %d, want %d", p, e.Code, tc.codes[p])
				}
			}
			for p, w := range tc.errs {
				if !strings.Contains(got[p], w) {
					t.Errorf("%s: error %q, want %q", p, got[p], w)
				}
			}
			if len(got) != len(tc.errs) {
				t.Errorf("errors %v, want %v", got, tc.errs)
			}
			for _, e := range entries {
				_, err := os.Lstat(filepath.Join(s.root, e.Path))
				if _, refused := tc.errs[e.Path]; refused == (err == nil) {
					t.Errorf("%s: refused %v, yet there: %v", e.Path, refused, err)
				}
			}
			s.check(t)
		})
	}
}
