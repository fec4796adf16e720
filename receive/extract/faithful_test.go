package extract_test

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// faithful are the receive options of a system copy.
var faithful = extract.Options{Xattrs: true, ACLs: true, Sparse: true}

// aclValue is an ACL in the kernel's xattr format (version 2, then tag,
// permissions and id of each entry): owner rw, user id r, group r, mask
// rw, other r.
func aclValue(id uint32) string {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 2)
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{0x01, 6, ^uint32(0)}, {0x02, 4, id}, {0x04, 4, ^uint32(0)}, {0x10, 6, ^uint32(0)}, {0x20, 4, ^uint32(0)}} {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return string(b)
}

// paxTar is a tar stream of regular files with PAX records, as the sender
// writes files with attributes or a sparse map.
func paxTar(t testing.TB, id uint64, files ...paxFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{wire.PAXBatch: strconv.FormatUint(id, 10)}})
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Size: int64(len(f.data)), Mode: 0o644,
			ModTime: time.Unix(0, mtime), PAXRecords: f.records, Format: tar.FormatPAX}); err != nil {
			t.Fatalf("tar header %q: %v", f.name, err)
		}
		tw.Write([]byte(f.data))
	}
	tw.Close()
	return buf.Bytes()
}

type paxFile struct {
	name    string
	data    string
	records map[string]string
}

func getxattr(t testing.TB, p, name string) (string, error) {
	t.Helper()
	b := make([]byte, 64<<10)
	n, err := unix.Lgetxattr(p, name, b)
	if err != nil {
		return "", err
	}
	return string(b[:n]), nil
}

// needXattrs skips where the filesystem of dir has no user attributes.
func needXattrs(t *testing.T, dir string) {
	t.Helper()
	if err := unix.Setxattr(dir, "user.bulkmove-probe", []byte("1"), 0); err != nil {
		t.Skipf("no user extended attributes on %s: %v", dir, err)
	}
	unix.Removexattr(dir, "user.bulkmove-probe")
}

// TestXattrsAndSparseLand: a file's attributes and ACL from its tar
// header, a directory's default ACL and attribute from the manifest, and a
// sparse file sent as two extents of a 64 MiB file, which lands with
// the same content and takes only its data's blocks.
func TestXattrsAndSparseLand(t *testing.T) {
	s := newSandbox(t)
	needXattrs(t, s.root)
	r := s.open(t, faithful)
	const size = 64 << 20
	ext := []wire.Extent{{Off: 4096, Len: 8192}, {Off: 32 << 20, Len: 4096}}
	data := strings.Repeat("a", 8192) + strings.Repeat("b", 4096)
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("d/f", 5), fileE("d/sparse", size)}}
	raw := paxTar(t, 1,
		paxFile{"d/f", "hello", map[string]string{wire.PAXXattr + "user.color": "blue", wire.PAXXattr + wire.ACLAccess: aclValue(65534)}},
		paxFile{"d/sparse", data, map[string]string{wire.PAXSparse: wire.FormatExtents(ext)}})
	mustReceive(t, r, m, raw)
	fin := &wire.BatchManifest{ID: 2, Flags: wire.FlagFinal, Entries: []model.Entry{dirE("d", 0o755)},
		Xattrs: [][]wire.Xattr{{{Name: "user.dir", Value: "x"}, {Name: wire.ACLDefault, Value: aclValue(65534)}}}}
	fin, err := wire.DecodeManifest(wire.EncodeManifest(fin)) // as it travels
	if err != nil {
		t.Fatal(err)
	}
	mustReceive(t, r, fin, nil)

	f := filepath.Join(s.root, "d/f")
	for name, want := range map[string]string{"user.color": "blue", wire.ACLAccess: aclValue(65534)} {
		if got, err := getxattr(t, f, name); err != nil || got != want {
			t.Errorf("%s of d/f: %q, %v; want %q", name, got, err, want)
		}
	}
	d := filepath.Join(s.root, "d")
	for name, want := range map[string]string{"user.dir": "x", wire.ACLDefault: aclValue(65534)} {
		if got, err := getxattr(t, d, name); err != nil || got != want {
			t.Errorf("%s of d: %q, %v; want %q", name, got, err, want)
		}
	}
	if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("d: %v, %v; want mode 0755 (a default ACL leaves the mode alone)", fi.Mode(), err)
	}

	sp := filepath.Join(s.root, "d/sparse")
	got, err := os.ReadFile(sp)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, size)
	copy(want[4096:], data[:8192])
	copy(want[32<<20:], data[8192:])
	if !bytes.Equal(got, want) {
		t.Errorf("d/sparse: %d bytes, not the extents at their offsets and zeros elsewhere", len(got))
	}
	var st unix.Stat_t
	if err := unix.Stat(sp, &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used > 1<<20 {
		t.Errorf("d/sparse takes %d bytes on disk for 12 KiB of data in %d: not sparse", used, size)
	}
}

// TestInheritedACLRemoved: a file landing in a directory with a default
// ACL, whose source had no ACL, gets none (and its own mode), as at the
// source.
func TestInheritedACLRemoved(t *testing.T) {
	s := newSandbox(t)
	needXattrs(t, s.root)
	os.Mkdir(filepath.Join(s.root, "d"), 0o755)
	if err := unix.Setxattr(filepath.Join(s.root, "d"), wire.ACLDefault, []byte(aclValue(65534)), 0); err != nil {
		t.Skipf("no ACLs here: %v", err)
	}
	r := s.open(t, faithful)
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("d/f", 2)}}
	mustReceive(t, r, m, tarOf(t, 1, tf("d/f", "hi")))
	p := filepath.Join(s.root, "d/f")
	if v, err := getxattr(t, p, wire.ACLAccess); err == nil {
		t.Errorf("d/f has the inherited ACL %q", v)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Errorf("d/f: mode %v, want 0644", fi.Mode().Perm())
	}
}

// TestHostileXattrsAndSparse: attributes and sparse maps a receiver
// refuses, with an error that says what and why; nothing lands.
func TestHostileXattrsAndSparse(t *testing.T) {
	x := func(name, v string) map[string]string { return map[string]string{wire.PAXXattr + name: v} }
	sparse := func(m string) map[string]string { return map[string]string{wire.PAXSparse: m} }
	for _, c := range []struct {
		name    string
		opt     extract.Options
		size    int64 // the manifest's
		data    string
		records map[string]string
		want    string
	}{
		{"namespace", faithful, 2, "hi", x("system.evil", "1"), `"system.evil" is outside the namespaces`},
		{"not asked", extract.Options{ACLs: true}, 2, "hi", x("user.a", "1"), "not asked for (-X)"},
		{"ACL not asked", extract.Options{Xattrs: true}, 2, "hi", x(wire.ACLAccess, aclValue(1)), "not asked for (-A)"},
		{"default ACL on a file", faithful, 2, "hi", x(wire.ACLDefault, aclValue(1)), "default ACL on a file"},
		{"oversized", faithful, 2, "hi", x("user.big", strings.Repeat("x", 70<<10)), "over 65536 bytes"},
		{"long name", faithful, 2, "hi", x("user."+strings.Repeat("n", 300), "1"), "invalid attribute name"},
		{"sparse not asked", extract.Options{}, 1 << 30, "hi", sparse("1,0,2"), "not asked for (--sparse)"},
		{"sparse beyond the manifest's size", faithful, 1 << 20, "hi", sparse("1,1048575,2"), "inside the file's 1048576 bytes"},
		{"sparse map and data disagree", faithful, 1 << 30, "hi", sparse("1,0,4"), "places 4 bytes of data, its header declares 2"},
		{"sparse overlapping", faithful, 1 << 30, "hi", sparse("2,0,1,0,1"), "not a new range"},
		{"sparse count", faithful, 1 << 30, "hi", sparse("5000"), "malformed sparse map"},
		{"sparse negative", faithful, 1 << 30, "hi", sparse("1,-5,2"), "not a new range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t)
			r := s.open(t, c.opt)
			m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("f", c.size)}}
			_, err := r.Receive(m, []bool{true}, bytes.NewReader(paxTar(t, 1, paxFile{"f", c.data, c.records})))
			if !errors.Is(err, extract.ErrStream) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"f"`) {
				t.Errorf("got %v; want a stream error naming f and saying %q", err, c.want)
			}
			if _, err := os.Lstat(filepath.Join(s.root, "f")); err == nil {
				t.Error("f landed")
			}
			s.check(t)
		})
	}
	// In a manifest: refused by the decoder, or by the receiver's options.
	enc := func(k model.Kind, xs ...wire.Xattr) []byte {
		e := dirE("d", 0o755)
		e.Kind = k
		return wire.EncodeManifest(&wire.BatchManifest{ID: 1, Flags: wire.FlagFinal, Entries: []model.Entry{e}, Xattrs: [][]wire.Xattr{xs}})
	}
	for _, c := range []struct {
		name string
		p    []byte
		want string
	}{
		{"namespace", enc(model.KindDir, wire.Xattr{Name: "system.nfs4_acl", Value: "1"}), `"system.nfs4_acl" is outside the namespaces`},
		{"twice", enc(model.KindDir, wire.Xattr{Name: "user.a", Value: "1"}, wire.Xattr{Name: "user.a", Value: "2"}), `"user.a" given twice`},
		{"oversized", enc(model.KindDir, wire.Xattr{Name: "user.a", Value: strings.Repeat("x", 40<<10)}, wire.Xattr{Name: "user.b", Value: strings.Repeat("x", 40<<10)}), "over 65536 bytes"},
		{"on a file", enc(model.KindFile, wire.Xattr{Name: "user.a", Value: "1"}), "a file's travel with its data"},
	} {
		if c.name == "on a file" { // the encoder leaves them out: set the bit by hand
			c.p = wire.EncodeManifest(&wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("d", 0)}})
			c.p = append(c.p, 1, 2, 'u', '.', 0) // a count, a short name...
			c.p[3] |= 0x40
		}
		if _, err := wire.DecodeManifest(c.p); !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("manifest %s: %v; want a protocol error saying %q", c.name, err, c.want)
		}
	}
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	m, err := wire.DecodeManifest(enc(model.KindDir, wire.Xattr{Name: "user.a", Value: "1"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Receive(m, needFor(r, m), bytes.NewReader(tarOf(t, 1))); err == nil || !strings.Contains(err.Error(), "not asked for (-X)") {
		t.Errorf("a directory's attribute not asked for: %v", err)
	}
}
