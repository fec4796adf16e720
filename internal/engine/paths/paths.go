// Package paths is where a job reads and writes: SRC and DEST resolved
// once (ResolveSrc, ResolveDest), their identity by device and inode
// (Place, PlaceOf), the refusal of a SRC and DEST that share a tree
// (Overlap, CheckOverlap, InSource), and the same across two hosts that
// may be one machine (HostPlace, HostID: a pull's send-hub and an agent
// refuse an overlap on their side too).
//
// It sits below internal/engine and cmd/bulkmove, which both resolve
// paths with it; it imports nothing of the project, and must not import
// internal/engine.
package paths

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// SRC and DEST are resolved once, here, and every part of a job (the walk,
// the sender's reads, the receiver, --delete) uses what they name: a
// top-level SRC that is a symlink is followed (a chain of them, relative or
// absolute), symlinks inside SRC stay symlinks, a DEST that is a symlink
// is followed. SRC and DEST that share a tree are refused, by device and
// inode, so that bind mounts and symlinked ancestors cannot hide it.

// ResolveSrc follows SRC, and any symlink on its way, to the file or
// directory it names: the absolute path of that, with no symlink left,
// and its FileInfo.
func ResolveSrc(src string) (string, os.FileInfo, error) {
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return "", nil, err
	}
	if real, err = filepath.Abs(real); err != nil {
		return "", nil, err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", nil, err
	}
	return real, fi, nil
}

// ResolveDest returns DEST as an absolute path whose existing part has no
// symlink left (DEST itself followed if it is one); the part that does
// not exist yet is kept as named (a file in its way is the receiver's to
// report, as it makes DEST). A dangling symlink on the way is an error:
// what it names is not there to write into.
func ResolveDest(dst string) (string, error) {
	abs, err := filepath.Abs(dst)
	if err != nil {
		return "", err
	}
	d, rest := abs, ""
	for {
		_, err := os.Stat(d)
		if err == nil {
			r, err := filepath.EvalSymlinks(d)
			if err != nil {
				return "", err
			}
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return "", err
		}
		if fi, lerr := os.Lstat(d); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(d)
			return "", fmt.Errorf("%s is a symlink to %s, which does not exist", d, target)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(d), rest)
		d = parent
	}
}

// fileID is a file's identity on one machine.
type fileID struct {
	Dev uint64 `json:"d"`
	Ino uint64 `json:"i"`
}

func idOf(fi os.FileInfo) fileID {
	st := fi.Sys().(*syscall.Stat_t)
	return fileID{Dev: uint64(st.Dev), Ino: st.Ino}
}

// Place is a path by identity: the path itself if it exists, then each
// of its ancestors up to /. Two places on one machine Overlap if one's
// first identity is among the other's.
type Place struct {
	Path   string   `json:"path"`   // as the user named it, for messages
	Exists bool     `json:"exists"` // IDs[0] is the path itself, else its nearest existing ancestor
	IDs    []fileID `json:"ids"`
}

// PlaceOf identifies resolved, an absolute path whose existing part has
// no symlink (ResolveSrc, ResolveDest): each parent of it by name is its
// parent on disk. named is how messages call it.
func PlaceOf(named, resolved string) (Place, error) {
	p := Place{Path: named, Exists: true}
	for d := resolved; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		switch {
		case err == nil:
			p.IDs = append(p.IDs, idOf(fi))
		case len(p.IDs) == 0 && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)):
			p.Exists = false
		default:
			return p, err
		}
		if d == filepath.Dir(d) {
			return p, nil
		}
	}
}

// Overlap refuses a SRC and a DEST (where the job writes: DEST, or, for a
// single file, the name it lands as) that share a tree: the same file or
// directory, DEST inside SRC (the copy would copy itself), or SRC inside
// DEST (the copy, and --delete, would write over SRC).
func Overlap(src, dst Place) error {
	if len(src.IDs) == 0 || len(dst.IDs) == 0 || !src.Exists {
		return nil
	}
	s := src.IDs[0]
	switch {
	case dst.Exists && dst.IDs[0] == s:
		return fmt.Errorf("the source %s and the destination %s are the same file or directory", src.Path, dst.Path)
	case slices.Contains(dst.IDs, s):
		return fmt.Errorf("destination %s is inside the source %s: the copy would copy itself", dst.Path, src.Path)
	case dst.Exists && slices.Contains(src.IDs, dst.IDs[0]):
		return fmt.Errorf("source %s is inside the destination %s: the copy would write over its own source", src.Path, dst.Path)
	}
	return nil
}

// CheckOverlap identifies SRC and DEST (both resolved) and refuses an
// Overlap; err is nil if they are apart, refused tells an Overlap from a
// failure to look.
func CheckOverlap(srcName, src, dstName, dst string) (refused bool, err error) {
	s, err := PlaceOf(srcName, src)
	if err != nil {
		return false, fmt.Errorf("source %s: %w", srcName, Unwrap(err))
	}
	d, err := PlaceOf(dstName, dst)
	if err != nil {
		return false, fmt.Errorf("destination %s: %w", dstName, Unwrap(err))
	}
	if err := Overlap(s, d); err != nil {
		return true, err
	}
	return false, nil
}

// InSource reports whether dir is the directory src (resolved) or below
// it.
func InSource(src, dir string) (bool, error) {
	d, err := ResolveDest(dir)
	if err != nil {
		return false, err
	}
	sp, err := PlaceOf(src, src)
	if err != nil {
		return false, err
	}
	dp, err := PlaceOf(dir, d)
	if err != nil {
		return false, err
	}
	return slices.Contains(dp.IDs, sp.IDs[0]), nil
}

// HostPlace is a Place as another process of the job is told it (the
// agent of a push, the sending end of a pull), with the machine it is
// on: identities compare only on one running kernel.
type HostPlace struct {
	Machine string `json:"machine"` // HostID() where it was taken
	Place
	As string `json:"as,omitempty"` // a single-file push: the name SRC lands as under the agent's ROOT
}

// encode is the flag value that carries h.
func (h HostPlace) Encode() string {
	b, _ := json.Marshal(h)
	return string(b)
}

func DecodeHostPlace(s string) (HostPlace, error) {
	var h HostPlace
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return h, fmt.Errorf("bad place %q: %w", s, err)
	}
	return h, nil
}

// sameHost reports whether h was taken on this machine (by this kernel):
// only then do device and inode numbers compare.
func (h HostPlace) SameHost() bool {
	id := HostID()
	return id != "" && h.Machine == id
}

// HostID identifies this running system: its machine-id
// (/etc/machine-id, or /var/lib/dbus/machine-id) and its boot id (cloned
// machines can share a machine-id; device numbers are the kernel's).
// "" if there is no machine-id.
func HostID() string {
	var mid string
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if b, err := os.ReadFile(p); err == nil {
			if mid = strings.TrimSpace(string(b)); mid != "" {
				break
			}
		}
	}
	if mid == "" {
		return ""
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return mid + "/" + strings.TrimSpace(string(boot))
}

// Unwrap is err without the operation and path an *os.PathError adds:
// for messages that name the path themselves.
func Unwrap(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
