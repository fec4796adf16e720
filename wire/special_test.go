package wire_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// Devices, FIFOs and sockets round-trip in a manifest, a device with its
// major and minor (any 32-bit numbers, whatever the system's dev_t); a
// device number past 32 bits, or cut short, is a protocol error.
func TestManifestSpecialFiles(t *testing.T) {
	m := &wire.BatchManifest{ID: 4, Flags: wire.FlagFinal, Entries: []model.Entry{
		{Path: "null", Kind: model.KindCharDevice, Mode: 0o666, MTime: 7, UID: 1, GID: 2, Rdev: model.Mkdev(1, 3)},
		{Path: "disk", Kind: model.KindBlockDevice, Mode: 0o660, Rdev: model.Mkdev(1<<32-1, 1<<20)},
		{Path: "pipe", Kind: model.KindFIFO, Mode: 0o640, MTime: 9},
		{Path: "sock", Kind: model.KindSocket, Mode: 0o755},
		{Path: "f", Kind: model.KindFile, Mode: 0o644, Size: 1, Nlink: 1},
	}}
	got, err := wire.DecodeManifest(wire.EncodeManifest(m))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v", got, m)
	}

	dev := wire.EncodeManifest(&wire.BatchManifest{ID: 1, Entries: []model.Entry{{Path: "d", Kind: model.KindCharDevice, Rdev: model.Mkdev(1, 3)}}})
	if _, err := wire.DecodeManifest(dev[:len(dev)-1]); !errors.Is(err, wire.ErrProtocol) {
		t.Errorf("a device cut before its minor: %v, want a protocol error", err)
	}
	// id, flags, count, kind, path "d", mode, size, mtime, uid, gid,
	// nlink, link "": the major follows, one byte (1); make it 2^32.
	at := 3 + 1 + 2 + 7
	if dev[at] != 1 {
		t.Fatalf("the major is not at byte %d of %x", at, dev)
	}
	big := append(append(dev[:at:at], 0x80, 0x80, 0x80, 0x80, 0x10), dev[at+1:]...)
	if _, err := wire.DecodeManifest(big); !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), "device number") {
		t.Errorf("a major of 2^32: %v, want a protocol error naming the device number", err)
	}
}
