package extract_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// TestDeltaBaseNotOpened: where DEST's name holds a device, not a file,
// the delta takes no base from it, and never opens it (opening a device
// can act: a tape rewinds), whether the file would be built in a copy,
// patched in place or come as a range; inotify would see the open.
func TestDeltaBaseNotOpened(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  extract.Options
		e    func(model.Entry) model.Entry
	}{
		{"copy", extract.Options{DeltaMin: 1}, func(e model.Entry) model.Entry { return e }},
		{"inplace", extract.Options{DeltaMin: 1, InPlace: true}, func(e model.Entry) model.Entry { return e }},
		{"range", extract.Options{DeltaMin: 1}, func(e model.Entry) model.Entry { e.Off, e.Len = 1<<20, 1<<20; return e }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t)
			p := filepath.Join(s.root, "f")
			if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
				t.Skipf("mknod a device: %v", err)
			}
			in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
			if err != nil {
				t.Skipf("inotify: %v", err)
			}
			defer unix.Close(in)
			if _, err := unix.InotifyAddWatch(in, p, unix.IN_OPEN); err != nil {
				t.Skipf("inotify watch: %v", err)
			}
			r := s.open(t, c.opt)
			m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{c.e(fileE("f", 4<<20))}}
			need := r.Need(m.Entries)
			d := r.PrepareDeltas(m.Entries, need)
			defer d.Close()
			if lists := d.Lists(m.ID, len(m.Entries)); len(lists) != 0 {
				t.Errorf("%d block lists for a device", len(lists))
			}
			buf := make([]byte, 4096)
			if n, _ := unix.Read(in, buf); n > 0 {
				t.Errorf("the device at DEST's name was opened (%d bytes of inotify events)", n)
			}
		})
	}
}
