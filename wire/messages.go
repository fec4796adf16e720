package wire

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/bulkmove/bulkmove/model"
)

// Handshake is the Hello payload, JSON, sent first by each side.
type Handshake struct {
	Proto   int    `json:"proto"`
	Version string `json:"version"`
	// Sender to agent: how to receive.
	Options *ReceiveOptions `json:"options,omitempty"`
	// Agent to sender: who it is.
	OS   string `json:"os,omitempty"`
	Arch string `json:"arch,omitempty"`
	UID  int    `json:"uid,omitempty"`
	Root string `json:"root,omitempty"`
	// Process names the agent process (random, per process): streams
	// served by one process report its CPU time once, not once each.
	Process string `json:"process,omitempty"`
	// Free is the space the agent's user may still use at the root, in
	// bytes (statfs f_bavail); 0 if unknown.
	Free int64 `json:"free,omitempty"`
	// Slow says the root's filesystem answers each operation after a
	// round trip (NFS, FUSE): batches are best spread over many
	// directories (sharder.Options.Spread).
	Slow bool `json:"slow,omitempty"`
	// DestID names the destination directory itself (its device, inode
	// and birth time: extract.Receiver.Identity), so that the sender's
	// resume journal trusts only records of this very directory; "" if
	// unknown.
	DestID string `json:"dest_id,omitempty"`
	// Denied names what the sender asked for in its Options that the
	// receiver's policy does not allow and that it goes on without:
	// "owner" (the files then belong to the receiving user), for the
	// sender to warn. What it will not go on without refuses the stream.
	Denied []string `json:"denied,omitempty"`
}

// ReceiveOptions are the sender's choices that the receiver applies; those
// that bear on safety (Owner, KeepSetid, Xattrs, ACLs) are requests, which
// the receiver grants within its own policy (extract.Policy).
type ReceiveOptions struct {
	Fsync     bool   `json:"fsync,omitempty"`
	Owner     bool   `json:"owner,omitempty"`      // chown to the sender's numeric ids (when root)
	KeepSetid bool   `json:"keep_setid,omitempty"` // keep setuid/setgid bits
	Check     string `json:"check,omitempty"`      // one of the Check* modes; "" is CheckQuick
	WriteRate int64  `json:"write_rate,omitempty"` // bytes a second the receiver may write; 0: no limit
	// IOConcurrency is how many files the receiver writes at once; 0: it
	// chooses from its filesystem's measured latency (--io-concurrency).
	IOConcurrency int `json:"io_concurrency,omitempty"`
	// Faithful copies (see xattr.go, sparse.go): what the sender sends and
	// the receiver applies; anything else of the kind it refuses.
	Xattrs bool `json:"xattrs,omitempty"` // -X: user.*, and where the receiver is root trusted.* and security.*
	ACLs   bool `json:"acls,omitempty"`   // -A: POSIX ACLs
	Sparse bool `json:"sparse,omitempty"` // --sparse: files may come as data extents (BULKMOVE.sparse)
	// NoSums: the sender sends no content hashes with its commits
	// (--no-verify-transfer), so the receiver need not make them (and may
	// splice file bodies from a TCP socket to the file).
	NoSums bool `json:"no_sums,omitempty"`
	// Delete: the sender deletes what the source lacks (--delete), so
	// the receiver replaces a non-empty directory in the way of a file or
	// a symlink; without it such a directory stays and the entry fails.
	Delete bool `json:"delete,omitempty"`
	// Itemize: the receiver's acks say what changed of each entry
	// (BatchAck.Items), for the sender's -i.
	Itemize bool `json:"itemize,omitempty"`
	// Devices (--devices, -D) and Specials (--specials, -D): the final
	// batches may hold character and block devices, and FIFOs and
	// sockets, which the receiver makes (devices only where its policy
	// allows them and it may: root, CAP_MKNOD); an entry of a kind not
	// asked for is refused.
	Devices  bool `json:"devices,omitempty"`
	Specials bool `json:"specials,omitempty"`
	// DryRun: the job only asks (--dry-run): a DEST not there is not
	// made, and a batch to move or a prune that removes is refused.
	DryRun bool `json:"dry_run,omitempty"`
	// SyncInPlace: the sender removes each source file once its batch is
	// acknowledged (--remove-source-files, which sets Fsync too), so a
	// file found already in place is made durable (fsynced, with its
	// directory) before the ack as a file written is; one that cannot be
	// fails, and stays at the source.
	SyncInPlace bool `json:"sync_in_place,omitempty"`
	// Backup (--backup, -b): what a pass replaces or deletes is moved
	// aside on the receiving side, as rsync's --backup does: renamed to
	// its name plus Suffix in its directory, or, with BackupDir, moved to
	// BackupDir/its path plus Suffix. BackupDir relative is beneath DEST
	// (it may not leave it); absolute, it is on the receiving host, where
	// the receiver's policy allows one (extract.Policy.AbsBackupDir).
	// The sender resolves Suffix's default (rsync's: "~" without
	// BackupDir, "" with it).
	Backup    bool   `json:"backup,omitempty"`
	BackupDir string `json:"backup_dir,omitempty"`
	Suffix    string `json:"suffix,omitempty"`
	// Update (-u): a regular file at DEST newer than the entry (its
	// mtime) is left as it is, neither sent nor its attributes set; one
	// of another type is replaced all the same (rsync's --update).
	Update bool `json:"update,omitempty"`
	// Existing (--existing): nothing is created; an entry with nothing of
	// its name at DEST (nor, for a file, its directory) is left out.
	Existing bool `json:"existing,omitempty"`
	// UserMap and GroupMap are rsync's --usermap and --groupmap (--chown
	// is one of each): the receiver parses them itself, resolves their TO
	// names with its own name service and maps the owners of what it
	// installs, where it keeps owners at all (Owner granted). ByName
	// (--no-numeric-ids) maps an owner no rule matched to the receiver's
	// id of the sender's name for it, as rsync's default. Names: the
	// manifests carry the sender's names of their owners
	// (BatchManifest.Names), for ByName and rules that match names.
	UserMap  string `json:"usermap,omitempty"`
	GroupMap string `json:"groupmap,omitempty"`
	ByName   bool   `json:"by_name,omitempty"`
	Names    bool   `json:"names,omitempty"`
	// Chmod is rsync's --chmod (several joined by commas), applied by the
	// receiver to the modes sent, but symlinks'; ChmodUmask is the umask
	// that masks its clauses naming no class: the sender's.
	Chmod      string `json:"chmod,omitempty"`
	ChmodUmask uint32 `json:"chmod_umask,omitempty"`
	// FakeSuper (--fake-super on the receiving side): the receiver
	// chowns nothing and makes no device or special file; it keeps each
	// entry's owner, full mode and type in the user.rsync.%stat
	// attribute, in rsync's format (internal/xattrs), and files a
	// regular file for a device, special file or symlink.
	FakeSuper bool `json:"fake_super,omitempty"`
	// DeltaMin (protocol 19): a file of at least this many bytes that
	// DEST holds as a regular file of another size or mtime goes as a
	// block delta (delta.go); 0: every file whole (--whole-file).
	DeltaMin int64 `json:"delta_min,omitempty"`
	// InPlace (protocol 20, --inplace): a file that goes as a block delta
	// is patched where it is, not in a copy of DEST's file (delta.go).
	InPlace bool `json:"inplace,omitempty"`
}

// IDName is the sender's name of one owner of a manifest's entries: a user
// (a group if Group) and its id. An id the sender has no name for is not
// named.
type IDName struct {
	Group bool
	ID    uint32
	Name  string
}

// Check modes: how the receiver decides that a regular file at the
// destination is up to date and need not be sent.
const (
	CheckQuick    = "quick"    // same type, size and mtime (the default)
	CheckNone     = "none"     // never: send every file (--no-quick-check)
	CheckSize     = "size"     // same type and size (--size-only)
	CheckExisting = "existing" // anything of the same type exists (--ignore-existing)
	CheckSum      = "checksum" // same type, size and content hash, from the manifest's Sums (--checksum)
)

// Sum is a regular file's content hash in CheckSum mode: XXH3-128, its
// 16 bytes big-endian. The zero Sum means none (the sender could not read
// the file): such a file is always sent.
type Sum [16]byte

// Flags of a batch.
const (
	// FlagFinal marks a batch of deferred entries (hard links, symlinks,
	// directory metadata) applied in manifest order, after file data.
	FlagFinal = 1 << iota
	// FlagVerify asks the receiver to compare the entries with what it
	// holds and answer with an Ack listing the differences (CodeDiffer),
	// writing nothing: no need list, no data.
	FlagVerify
	// FlagItemize asks the receiver what a move of the entries would
	// change (-i with --dry-run) and to answer with an Ack whose Items
	// say it, writing nothing: no need list, no data.
	FlagItemize
)

// BatchManifest is the Manifest payload.
type BatchManifest struct {
	ID      uint64
	Flags   uint64
	Entries []model.Entry
	// Sums, in CheckSum mode, holds the content hash of each regular file
	// (Sums[i] is Entries[i]'s; a zero Sum or a short slice: none). Nil
	// otherwise, and nil after decoding a manifest that carries none.
	Sums []Sum
	// Xattrs holds the extended attributes and ACLs of directories and
	// symlinks (with -X or -A; Xattrs[i] is Entries[i]'s; a short slice:
	// none). A regular file's travel in its tar header instead.
	Xattrs [][]Xattr
	// Names are the sender's names of the entries' owners, when the
	// receive options ask for them (ReceiveOptions.Names); nil otherwise.
	Names []IDName
}

// kindHasSum, set in an entry's kind byte, says that a 16-byte Sum ends
// the entry: a manifest without sums is byte for byte what it was.
const kindHasSum = 0x80

// kindHasXattrs, set in a directory's or symlink's kind byte, says that
// its extended attributes follow (after the Sum, if any).
const kindHasXattrs = 0x40

// kindHasRange, set in a regular file's kind byte, says that the entry is
// one range of a split file: its offset and length follow (after the Sum,
// if any), within [0, Size).
const kindHasRange = 0x20

// kindResumed, set in a regular file's kind byte, says that the sender's
// resume journal names the file as in place from an earlier run
// (Entry.Resumed): under --no-quick-check the receiver still checks it
// (size and mtime) rather than always asking for it.
const kindResumed = 0x10

// EncodeManifest encodes a batch's manifest.
func EncodeManifest(m *BatchManifest) []byte {
	e := enc{b: make([]byte, 0, 64+len(m.Entries)*48)}
	e.uvarint(m.ID)
	e.uvarint(m.Flags)
	e.uvarint(uint64(len(m.Entries)))
	for i := range m.Entries {
		x := &m.Entries[i]
		hasSum := i < len(m.Sums) && m.Sums[i] != (Sum{}) && x.Kind == model.KindFile
		hasXattrs := i < len(m.Xattrs) && len(m.Xattrs[i]) > 0 && (x.Kind == model.KindDir || x.Kind == model.KindSymlink)
		k := byte(x.Kind)
		if hasSum {
			k |= kindHasSum
		}
		if hasXattrs {
			k |= kindHasXattrs
		}
		hasRange := x.Kind == model.KindFile && x.Len > 0
		if hasRange {
			k |= kindHasRange
		}
		if x.Kind == model.KindFile && x.Resumed {
			k |= kindResumed
		}
		e.b = append(e.b, k)
		e.bytes(x.Path)
		e.uvarint(uint64(x.Mode))
		e.varint(x.Size)
		e.varint(x.MTime)
		e.uvarint(uint64(x.UID))
		e.uvarint(uint64(x.GID))
		e.uvarint(uint64(x.Nlink))
		e.bytes(x.Link)
		if x.Kind.IsDevice() {
			e.uvarint(uint64(x.Major()))
			e.uvarint(uint64(x.Minor()))
		}
		if hasSum {
			e.b = append(e.b, m.Sums[i][:]...)
		}
		if hasXattrs {
			e.xattrs(m.Xattrs[i])
		}
		if hasRange {
			e.varint(x.Off)
			e.varint(x.Len)
		}
	}
	if len(m.Names) > 0 {
		// After the entries: a manifest without names is byte for byte
		// what it was.
		e.uvarint(uint64(len(m.Names)))
		for _, n := range m.Names {
			var g byte
			if n.Group {
				g = 1
			}
			e.b = append(e.b, g)
			e.uvarint(uint64(n.ID))
			e.bytes(n.Name)
		}
	}
	return e.b
}

// MaxName is the longest owner's name a manifest carries (rsync's).
const MaxName = 255

// names reads a manifest's names of owners: at most one per user
// and group id its n entries hold.
func (d *dec) names(n uint64) ([]IDName, error) {
	c := d.uvarint("name count")
	if d.err != nil {
		return nil, d.err
	}
	if c == 0 || c > 2*n || c > uint64(len(d.b))/3 {
		return nil, protoErr("manifest of %d entries names %d owners in %d bytes", n, c, len(d.b))
	}
	out := make([]IDName, 0, c)
	for i := uint64(0); i < c && d.err == nil; i++ {
		g := d.byte1("name kind")
		id := d.uvarint("named id")
		name := d.str("owner name", MaxName)
		if d.err != nil {
			break
		}
		if g > 1 || id > uint64(^uint32(0)) || name == "" || strings.ContainsAny(name, ":,\x00\n") {
			return nil, protoErr("manifest names owner %d as %q (kind %d)", id, name, g)
		}
		out = append(out, IDName{Group: g == 1, ID: uint32(id), Name: name})
	}
	return out, d.err
}

// Modes a manifest may carry: permissions and the special bits, nothing else.
const allowedMode = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// ErrLimit marks what a peer sent that is well-formed but more than the
// receiver will hold (a manifest over its job's memory budget): the peer
// would send it again, so it is refused for good.
var ErrLimit = errors.New("over the receiver's limit")

// Memory a decoded manifest holds beyond its strings' bytes: an entry, a
// content hash, the header of an entry's attribute list and of one
// attribute (see ManifestCost).
const (
	entryCost     = int64(unsafe.Sizeof(model.Entry{}))
	sumCost       = int64(unsafe.Sizeof(Sum{}))
	xattrListCost = int64(unsafe.Sizeof([]Xattr(nil)))
	xattrCost     = int64(unsafe.Sizeof(Xattr{}))
	nameCost      = int64(unsafe.Sizeof(IDName{}))
)

// ManifestCost is the memory a decoded manifest holds, in bytes: its
// entries, their paths and link targets, its content hashes and extended
// attributes. Decoded entries take several times their encoded size (an
// entry of a few bytes on the wire holds over a hundred), so a receiver
// bounds the manifests it holds by this, not by their frames.
func ManifestCost(m *BatchManifest) int64 {
	c := entryCost*int64(cap(m.Entries)) + sumCost*int64(cap(m.Sums)) + xattrListCost*int64(cap(m.Xattrs))
	for i := range m.Entries {
		c += int64(len(m.Entries[i].Path) + len(m.Entries[i].Link))
	}
	for _, x := range m.Names {
		c += nameCost + int64(len(x.Name))
	}
	for _, xs := range m.Xattrs {
		c += xattrCost * int64(cap(xs))
		for _, x := range xs {
			c += int64(len(x.Name) + len(x.Value))
		}
	}
	return c
}

// DecodeManifest decodes and bounds-checks a manifest. It checks the shape
// of every field; whether a path is safe to create is the receiver's check.
func DecodeManifest(p []byte) (*BatchManifest, error) {
	return DecodeManifestMax(p, math.MaxInt64)
}

// DecodeManifestMax is DecodeManifest for a receiver that may hold at most
// max bytes more: a manifest whose decoded form (ManifestCost) would take
// more is refused with an error wrapping ErrLimit, before its entries are
// allocated when their count alone is too many, else as soon as its
// strings pass the bound.
func DecodeManifestMax(p []byte, max int64) (*BatchManifest, error) {
	d := dec{b: p}
	m := &BatchManifest{ID: d.uvarint("batch id"), Flags: d.uvarint("batch flags")}
	n := d.uvarint("entry count")
	if d.err != nil {
		return nil, d.err
	}
	if n > MaxEntries {
		return nil, protoErr("manifest declares %d entries, over the %d limit", n, MaxEntries)
	}
	// Each entry takes at least 9 bytes (kind, two empty strings, six
	// one-byte varints): never allocate more than the payload can hold.
	if n > uint64(len(d.b))/9 {
		return nil, protoErr("manifest declares %d entries in %d bytes", n, len(p))
	}
	cost := entryCost * int64(n)
	over := func() error {
		return fmt.Errorf("%w: manifest of batch %d (%d entries in %d bytes) takes over %d bytes of memory decoded, more than the %d the receiver may still hold",
			ErrLimit, m.ID, n, len(p), cost, max)
	}
	if cost > max {
		return nil, over()
	}
	m.Entries = make([]model.Entry, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		var x model.Entry
		kind := d.byte1("entry kind")
		x.Kind = model.Kind(kind &^ (kindHasSum | kindHasXattrs | kindHasRange | kindResumed))
		x.Path = d.str("entry path", MaxPath)
		mode := d.uvarint("entry mode")
		x.Size = d.varint("entry size")
		x.MTime = d.varint("entry mtime")
		uid := d.uvarint("entry uid")
		gid := d.uvarint("entry gid")
		nlink := d.uvarint("entry nlink")
		x.Link = d.str("entry link", MaxPath)
		if d.err != nil {
			break
		}
		if cost += int64(len(x.Path) + len(x.Link)); cost > max {
			return nil, over()
		}
		switch x.Kind {
		case model.KindFile, model.KindDir, model.KindSymlink, model.KindHardlink, model.KindFIFO, model.KindSocket:
		case model.KindCharDevice, model.KindBlockDevice:
			major, minor := d.uvarint("device major"), d.uvarint("device minor")
			if d.err != nil {
				break
			}
			if major > uint64(^uint32(0)) || minor > uint64(^uint32(0)) {
				return nil, protoErr("entry %q has an out-of-range device number %d:%d", x.Path, major, minor)
			}
			x.Rdev = model.Mkdev(uint32(major), uint32(minor))
		default:
			return nil, protoErr("entry %d (%q) has unknown kind %d", i, x.Path, kind)
		}
		if d.err != nil {
			break
		}
		if kind&kindHasSum != 0 {
			if x.Kind != model.KindFile {
				return nil, protoErr("entry %q has a content hash but is a %s, not a regular file", x.Path, x.Kind)
			}
			sum := d.sum("entry content hash")
			if d.err != nil {
				break
			}
			if sum == (Sum{}) {
				return nil, protoErr("entry %q has an all-zero content hash", x.Path) // the encoder leaves it out
			}
			if m.Sums == nil {
				if cost += sumCost * int64(n); cost > max {
					return nil, over()
				}
				m.Sums = make([]Sum, n)
			}
			m.Sums[i] = sum
		}
		if kind&kindHasXattrs != 0 {
			if x.Kind != model.KindDir && x.Kind != model.KindSymlink {
				return nil, protoErr("entry %q has extended attributes in the manifest but is a %s (a file's travel with its data)", x.Path, x.Kind)
			}
			xs := d.xattrs(fmt.Sprintf("extended attributes of %q", x.Path))
			if d.err != nil {
				break
			}
			if m.Xattrs == nil {
				cost += xattrListCost * int64(n)
				m.Xattrs = make([][]Xattr, n)
			}
			m.Xattrs[i] = xs
			for _, x := range xs {
				cost += xattrCost + int64(len(x.Name)+len(x.Value))
			}
			if cost > max {
				return nil, over()
			}
		}
		if kind&kindResumed != 0 {
			if x.Kind != model.KindFile {
				return nil, protoErr("entry %q is marked as resumed but is a %s, not a regular file", x.Path, x.Kind)
			}
			x.Resumed = true
		}
		if kind&kindHasRange != 0 {
			if x.Kind != model.KindFile {
				return nil, protoErr("entry %q has a range but is a %s, not a regular file", x.Path, x.Kind)
			}
			x.Off, x.Len = d.varint("entry range offset"), d.varint("entry range length")
			if d.err != nil {
				break
			}
			if x.Off < 0 || x.Len <= 0 || x.Size < 0 || x.Off > x.Size-x.Len {
				return nil, protoErr("entry %q: range of %d bytes at offset %d does not lie within the file's %d bytes", x.Path, x.Len, x.Off, x.Size)
			}
		}
		if mode > uint64(^uint32(0)) || fs.FileMode(mode)&^allowedMode != 0 {
			return nil, protoErr("entry %q has invalid mode %#o", x.Path, mode)
		}
		x.Mode = fs.FileMode(mode)
		if x.Size < 0 {
			return nil, protoErr("entry %q has negative size %d", x.Path, x.Size)
		}
		if uid > uint64(^uint32(0)) || gid > uint64(^uint32(0)) || nlink > uint64(^uint32(0)) {
			return nil, protoErr("entry %q has out-of-range ids", x.Path)
		}
		x.UID, x.GID, x.Nlink = uint32(uid), uint32(gid), uint32(nlink)
		m.Entries = append(m.Entries, x)
	}
	if d.err == nil && len(d.b) > 0 {
		names, err := d.names(n)
		if err != nil {
			return nil, err
		}
		for _, x := range names {
			cost += nameCost + int64(len(x.Name))
		}
		if cost > max {
			return nil, over()
		}
		m.Names = names
	}
	if err := d.done("manifest"); err != nil {
		return nil, err
	}
	if err := checkRanges(m.Entries); err != nil {
		return nil, err
	}
	return m, nil
}

// checkRanges refuses a manifest whose ranges of one file overlap, or
// name different versions (size, mtime) of it.
func checkRanges(entries []model.Entry) error {
	var byPath map[string][]int
	for i := range entries {
		if entries[i].Len > 0 {
			if byPath == nil {
				byPath = map[string][]int{}
			}
			byPath[entries[i].Path] = append(byPath[entries[i].Path], i)
		}
	}
	for p, idx := range byPath {
		if len(idx) < 2 {
			continue
		}
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(entries[a].Off, entries[b].Off) })
		for k := 1; k < len(idx); k++ {
			a, b := &entries[idx[k-1]], &entries[idx[k]]
			if a.Size != b.Size || a.MTime != b.MTime {
				return protoErr("ranges of %q name two versions of the file (size %d and %d)", p, a.Size, b.Size)
			}
			if a.Off+a.Len > b.Off {
				return protoErr("ranges of %q overlap: %d bytes at %d and %d bytes at %d", p, a.Len, a.Off, b.Len, b.Off)
			}
		}
	}
	return nil
}

// sum reads a content hash: exactly 16 bytes.
func (d *dec) sum(what string) (s Sum) {
	if d.err != nil {
		return s
	}
	if len(d.b) < len(s) {
		d.fail(what)
		return s
	}
	copy(s[:], d.b)
	d.b = d.b[len(s):]
	return s
}

// EncodeNeed encodes which entries of batch id the agent wants sent: one
// bit per entry.
func EncodeNeed(id uint64, need []bool) []byte {
	e := enc{}
	e.uvarint(id)
	e.uvarint(uint64(len(need)))
	bits := make([]byte, (len(need)+7)/8)
	for i, n := range need {
		if n {
			bits[i/8] |= 1 << (i % 8)
		}
	}
	e.b = append(e.b, bits...)
	return e.b
}

// DecodeNeed decodes a Need payload.
func DecodeNeed(p []byte) (id uint64, need []bool, err error) {
	d := dec{b: p}
	id = d.uvarint("need batch id")
	n := d.uvarint("need count")
	if d.err != nil {
		return 0, nil, d.err
	}
	if n > MaxEntries || uint64(len(d.b)) != (n+7)/8 {
		return 0, nil, protoErr("need list of %d entries in %d bytes", n, len(d.b))
	}
	need = make([]bool, n)
	for i := range need {
		need[i] = d.b[i/8]&(1<<(i%8)) != 0
	}
	return id, need, nil
}

// EncodeID encodes a bare batch id (the Data payload).
func EncodeID(id uint64) []byte {
	e := enc{}
	e.uvarint(id)
	return e.b
}

// DecodeID decodes a bare batch id.
func DecodeID(p []byte) (uint64, error) {
	d := dec{b: p}
	id := d.uvarint("batch id")
	return id, d.done("batch id")
}

// Discard is an entry the sender withdraws from a batch after sending (it
// changed while being read): the receiver must not install it.
type Discard struct {
	Index  int
	Reason string
}

// IndexedSum is the content hash (XXH3-128) of entry Index as the sender
// read it: the receiver checks what arrived against it before the file
// takes its final name (end-to-end integrity).
type IndexedSum struct {
	Index int
	Sum   Sum
}

// EncodeCommit encodes a Commit payload: the batch, the files withdrawn,
// and the content hashes of the files sent.
func EncodeCommit(id uint64, discards []Discard, sums ...IndexedSum) []byte {
	e := enc{}
	e.uvarint(id)
	e.uvarint(uint64(len(discards)))
	for _, d := range discards {
		e.uvarint(uint64(d.Index))
		e.bytes(truncate(d.Reason))
	}
	if len(sums) > 0 {
		e.uvarint(uint64(len(sums)))
		for _, s := range sums {
			e.uvarint(uint64(s.Index))
			e.b = append(e.b, s.Sum[:]...)
		}
	}
	return e.b
}

// DecodeCommit decodes a Commit payload, without its hashes.
func DecodeCommit(p []byte) (id uint64, discards []Discard, err error) {
	id, discards, _, err = DecodeCommitSums(p)
	return id, discards, err
}

// DecodeCommitSums decodes a Commit payload with its content hashes.
func DecodeCommitSums(p []byte) (id uint64, discards []Discard, sums []IndexedSum, err error) {
	d := dec{b: p}
	id = d.uvarint("commit batch id")
	n := d.uvarint("discard count")
	if d.err == nil && n > uint64(len(d.b)) {
		return 0, nil, nil, protoErr("commit declares %d discards in %d bytes", n, len(d.b))
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		idx := d.uvarint("discard index")
		why := d.str("discard reason", MaxMessage)
		if idx > MaxEntries {
			return 0, nil, nil, protoErr("discard index %d out of range", idx)
		}
		discards = append(discards, Discard{Index: int(idx), Reason: why})
	}
	if d.err == nil && len(d.b) > 0 {
		ns := d.uvarint("hash count")
		if d.err == nil && ns > uint64(len(d.b))/17 {
			return 0, nil, nil, protoErr("commit declares %d hashes in %d bytes", ns, len(d.b))
		}
		for i := uint64(0); i < ns && d.err == nil; i++ {
			idx := d.uvarint("hash index")
			if idx > MaxEntries {
				return 0, nil, nil, protoErr("hash index %d out of range", idx)
			}
			if len(d.b) < len(Sum{}) {
				d.fail("hash")
				break
			}
			var s Sum
			copy(s[:], d.b)
			d.b = d.b[len(s):]
			sums = append(sums, IndexedSum{Index: int(idx), Sum: s})
		}
	}
	return id, discards, sums, d.done("commit")
}

// Error codes of an entry error; the sender maps them to its classes.
const (
	CodeOther    = 0
	CodeNoSpace  = 1 // ENOSPC or EDQUOT: stop the job
	CodePerm     = 2 // permission denied
	CodeInvalid  = 3 // refused by the receiver's safety rules
	CodeReadOnly = 4 // read-only filesystem
	CodeDiffer   = 5 // verify: the destination differs from the source
	CodeCorrupt  = 6 // what arrived does not hash to what the sender read: it goes again
)

// EntryError is the receiver's report of one entry it could not install.
type EntryError struct {
	Index int
	Code  int
	Msg   string
}

// An Item says what the receiver found changed of one entry of a batch
// (ReceiveOptions.Itemize): the ItemNew... bits, as rsync's -i reports
// them. An entry found in place as it is has none.
type Item struct {
	Index int
	Flags uint16
}

// Item flags.
const (
	ItemNew     = 1 << iota // not at DEST before
	ItemSize                // its size differed
	ItemTime                // its mtime differed
	ItemPerms               // its permission bits differed
	ItemOwner               // its owner differed (as root)
	ItemGroup               // its group differed (as root)
	ItemContent             // its content differed (by hash), or a symlink's target
	ItemSent                // a file whose data was sent (else only its attributes were set)
	itemAll     = 1<<iota - 1
)

// BatchAck is the Ack payload.
type BatchAck struct {
	ID      uint64
	Files   int64 // files installed
	Bytes   int64 // bytes written
	Skipped int64 // files already up to date
	Errors  []EntryError
	Items   []Item // with ReceiveOptions.Itemize: the entries found changed
	// Backups, with ReceiveOptions.Backup, are the paths (under DEST) of
	// what the batch replaced and moved aside, the files of a directory
	// in the way included, up to MaxAckBackups; where each went follows
	// from the options (ReceiveOptions.BackupPath). BackedUp counts them all.
	Backups  []string
	BackedUp int64

	// Where the receiver's time went, for the bottleneck verdict.
	WriteNanos int64 // writing file data (and creating, renaming)
	FsyncNanos int64 // in fsync
	CPUNanos   int64 // the receiving process's CPU time so far (user+system); 0 if unknown
	// LatencyNanos is the receiver's filesystem latency per operation as
	// it measures it (see package ioconc); 0 if unknown.
	LatencyNanos int64
}

// EncodeAck encodes an Ack payload.
func EncodeAck(a *BatchAck) []byte {
	e := enc{}
	e.uvarint(a.ID)
	e.varint(a.Files)
	e.varint(a.Bytes)
	e.varint(a.Skipped)
	e.varint(a.WriteNanos)
	e.varint(a.FsyncNanos)
	e.varint(a.CPUNanos)
	e.varint(a.LatencyNanos)
	e.uvarint(uint64(len(a.Errors)))
	for _, x := range a.Errors {
		e.uvarint(uint64(x.Index))
		e.uvarint(uint64(x.Code))
		e.bytes(truncate(x.Msg))
	}
	e.uvarint(uint64(len(a.Items)))
	for _, x := range a.Items {
		e.uvarint(uint64(x.Index))
		e.uvarint(uint64(x.Flags))
	}
	e.varint(a.BackedUp)
	e.uvarint(uint64(len(a.Backups)))
	for _, x := range a.Backups {
		e.bytes(x)
	}
	return e.b
}

// MaxAckBackups is the most backed-up paths one ack names
// (BatchAck.Backups); BackedUp counts the rest.
const MaxAckBackups = 4096

// BackupPath is where the backup of p (a path under DEST) goes, as the
// receiver names it to the user: p plus the suffix beside it, or under
// the backup directory.
func (o *ReceiveOptions) BackupPath(p string) string {
	if o.BackupDir == "" {
		return p + o.Suffix
	}
	return strings.TrimSuffix(o.BackupDir, "/") + "/" + p + o.Suffix
}

// DecodeAck decodes an Ack payload.
func DecodeAck(p []byte) (*BatchAck, error) {
	d := dec{b: p}
	a := &BatchAck{ID: d.uvarint("ack batch id"), Files: d.varint("ack files"), Bytes: d.varint("ack bytes"), Skipped: d.varint("ack skipped"),
		WriteNanos: d.varint("ack write time"), FsyncNanos: d.varint("ack fsync time"), CPUNanos: d.varint("ack cpu time"),
		LatencyNanos: d.varint("ack latency")}
	n := d.uvarint("ack error count")
	if d.err == nil && n > uint64(len(d.b)) {
		return nil, protoErr("ack declares %d errors in %d bytes", n, len(d.b))
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		idx := d.uvarint("ack error index")
		code := d.uvarint("ack error code")
		msg := d.str("ack error message", MaxMessage)
		if idx > MaxEntries || code > 255 {
			return nil, protoErr("ack error index %d code %d out of range", idx, code)
		}
		a.Errors = append(a.Errors, EntryError{Index: int(idx), Code: int(code), Msg: msg})
	}
	n = d.uvarint("ack item count")
	if d.err == nil && n > uint64(len(d.b)) {
		return nil, protoErr("ack declares %d items in %d bytes", n, len(d.b))
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		idx := d.uvarint("ack item index")
		flags := d.uvarint("ack item flags")
		if idx > MaxEntries || flags == 0 || flags > itemAll {
			return nil, protoErr("ack item index %d flags %#x out of range", idx, flags)
		}
		a.Items = append(a.Items, Item{Index: int(idx), Flags: uint16(flags)})
	}
	a.BackedUp = d.varint("ack backed-up count")
	n = d.count("ack backup count", MaxAckBackups)
	for i := uint64(0); i < n && d.err == nil; i++ {
		a.Backups = append(a.Backups, d.str("ack backup path", MaxPath))
	}
	if err := d.done("ack"); err != nil {
		return nil, err
	}
	if a.Files < 0 || a.Bytes < 0 || a.Skipped < 0 || a.WriteNanos < 0 || a.FsyncNanos < 0 || a.CPUNanos < 0 || a.LatencyNanos < 0 || a.BackedUp < int64(len(a.Backups)) {
		return nil, protoErr("ack with negative counts")
	}
	return a, nil
}

// Totals is the Summary payload, JSON.
type Totals struct {
	Files   int64 `json:"files"`
	Bytes   int64 `json:"bytes"`
	Skipped int64 `json:"skipped"`
	Errors  int64 `json:"errors"`

	WriteNanos int64 `json:"write_nanos"` // time spent writing
	FsyncNanos int64 `json:"fsync_nanos"` // time spent in fsync
}

// JSON helpers for the Hello and Summary frames.

// EncodeJSON marshals v (which never fails for this package's types).
func EncodeJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// DecodeJSON unmarshals a JSON payload, wrapping the error as a protocol error.
func DecodeJSON(p []byte, v any) error {
	if err := json.Unmarshal(p, v); err != nil {
		return protoErr("bad JSON frame: %v", err)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > MaxMessage {
		return s[:MaxMessage]
	}
	return s
}
