package extract

// Backups (--backup, --backup-dir, --suffix), with rsync's semantics: what
// a pass replaces (a file given new content, an entry whose type changed, a
// symlink or hard link made anew) or deletes (--delete) is moved aside
// rather than lost. Without a backup directory it is renamed to its name
// plus the suffix ("~" by default) in its own directory; with one it moves
// to DIR/its path plus the suffix ("" by default), the directories on the
// way made as needed. Directories themselves are not backed up: one that
// goes (deleted, or in the way of a file) has its files backed up, each,
// and is then removed; where the backups stay beside the files (no backup
// directory) it cannot be, and stays, as rsync's does.
//
// Moving aside is a rename, or, for an entry about to be replaced, a hard
// link to its backup name first, so that its name never goes missing
// (the replacing rename then takes it). Where the backup directory is on
// another filesystem (EXDEV), the entry is copied there (a regular file's
// data, mode and mtime, a symlink's target, a device or special file
// made anew) under a temporary name and renamed to its backup name; then
// the original goes, as rsync does.
//
// The backup directory is opened once, beneath DEST if relative (it may
// not leave it) or through the host's root if absolute, one component at
// a time with no symlink followed (OpenBeneath), and each directory in it
// the same way from its descriptor: a symlink a local user plants in the
// backup directory's path, even while the pass runs, is never followed;
// the entry whose backup would go through it fails, naming it. It is never
// deleted by --delete (PruneDir keeps it, by path and by identity), nor
// are backups made beside their files from an earlier pass (the receiving
// hub's prune adds rsync's "P *~" rule).

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/unixmode"
	"github.com/bulkmove/bulkmove/wire"
)

// backups is a receiver's backup directory, opened at its first use.
type backups struct {
	mu   sync.Mutex
	root *os.File // nil: not opened yet (or not there, for a lookup)
	dev  uint64
	ino  uint64
}

// aside gathers what one batch moved aside, for its ack
// (wire.BatchAck.Backups). A nil aside gathers nothing.
type aside struct {
	mu    sync.Mutex
	paths []string
	n     int64
}

func (a *aside) add(p string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	if len(a.paths) < wire.MaxAckBackups {
		a.paths = append(a.paths, p)
	}
}

// validBackup checks the backup options as a receiver must whoever sent
// them: a suffix that is a part of a name, and a relative backup
// directory that stays beneath DEST.
func (o *Options) validBackup() error {
	if !o.Backup {
		if o.BackupDir != "" || o.Suffix != "" {
			return errors.New("--backup-dir and --suffix go with --backup")
		}
		return nil
	}
	if strings.ContainsAny(o.Suffix, "/\x00") || len(o.Suffix) > 255 {
		return fmt.Errorf("--suffix %q: want a part of a file name (no slash, at most 255 bytes)", o.Suffix)
	}
	dir := o.BackupDir
	switch {
	case strings.ContainsRune(dir, 0) || len(dir) > wire.MaxPath:
		return fmt.Errorf("--backup-dir %q: not a path", dir)
	case dir == "":
	case filepath.IsAbs(dir):
	case !filepath.IsLocal(dir) && filepath.Clean(dir) != ".":
		return fmt.Errorf("--backup-dir %q: a relative backup directory must be beneath DEST (no \"..\"); give an absolute one for elsewhere on the receiving host", dir)
	}
	if o.Suffix == "" && (dir == "" || !filepath.IsAbs(dir) && filepath.Clean(dir) == ".") {
		return errors.New("--suffix cannot be empty without a --backup-dir other than DEST")
	}
	return nil
}

// backingUp reports whether what is replaced or deleted is moved aside.
func (r *Receiver) backingUp() bool { return r.opt.Backup && !r.opt.DryRun }

// besides reports whether backups stay beside their files (no backup
// directory, or DEST itself).
func (r *Receiver) besides() bool {
	d := r.opt.BackupDir
	return d == "" || !filepath.IsAbs(d) && filepath.Clean(d) == "."
}

// relBackupDir is the backup directory's path beneath DEST, cleaned, if
// it is given relative; "" otherwise.
func (r *Receiver) relBackupDir() string {
	if r.besides() || filepath.IsAbs(r.opt.BackupDir) {
		return ""
	}
	return filepath.ToSlash(filepath.Clean(r.opt.BackupDir))
}

// BackupPath is where the backup of p goes, as the user names it.
func (r *Receiver) BackupPath(p string) string {
	if r.besides() {
		return p + r.opt.Suffix
	}
	return path.Join(r.opt.BackupDir, p) + r.opt.Suffix
}

// backupRoot opens the backup directory, making it (and its missing
// parents) if create; nil and no error if it is not there and not to be
// made.
func (r *Receiver) backupRoot(create bool) (*os.File, error) {
	b := &r.bak
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.root != nil {
		return b.root, nil
	}
	dir := r.opt.BackupDir
	var parent *os.File
	rel := dir
	if filepath.IsAbs(dir) {
		// The host's root, then each component with no symlink followed.
		var err error
		if parent, err = os.OpenFile("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return nil, fmt.Errorf("--backup-dir %s: %w", dir, err)
		}
		defer parent.Close()
		rel = strings.TrimLeft(filepath.Clean(dir), "/")
	} else {
		parent = r.rootDir
	}
	f, err := openDirBeneath(parent, rel, create)
	if err != nil {
		if !create && errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, fmt.Errorf("--backup-dir %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("--backup-dir %s: %w", dir, err)
	}
	b.root, b.dev, b.ino = f, uint64(st.Dev), st.Ino
	return f, nil
}

// isBackupDir reports whether the directory open as fd, p under DEST, is
// the backup directory: by path if it was given relative, by identity if
// it was opened (an absolute one may be beneath DEST too).
func (r *Receiver) isBackupDir(p string, fd int) bool {
	if rel := r.relBackupDir(); rel != "" && p == rel {
		return true
	}
	r.bak.mu.Lock()
	open, dev, ino := r.bak.root != nil, r.bak.dev, r.bak.ino
	r.bak.mu.Unlock()
	if !open || fd < 0 {
		return false
	}
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && uint64(st.Dev) == dev && st.Ino == ino
}

// inBackupDir reports whether the directory dir, open as fd, is the
// backup directory or, given relative, beneath it.
func (r *Receiver) inBackupDir(dir string, fd int) bool {
	if rel := r.relBackupDir(); rel != "" && strings.HasPrefix(dir, rel+"/") {
		return true
	}
	return r.isBackupDir(dir, fd)
}

// BackupRule is the filter rule a prune adds after the sender's, as
// rsync does: with backups beside their files and --delete without
// --delete-excluded, "P *SUFFIX" keeps the backups of earlier passes.
// "" where there is none to add.
func (r *Receiver) BackupRule(deleteExcluded bool) string {
	if !r.opt.Backup || !r.besides() || deleteExcluded {
		return ""
	}
	return "P *" + r.opt.Suffix
}

// closeBackups releases the backup directory.
func (r *Receiver) closeBackups() {
	if r.bak.root != nil {
		r.bak.root.Close()
		r.bak.root = nil
	}
}

// backupTarget opens the directory the backup of p goes in and names the
// backup there; done releases what it opened.
func (r *Receiver) backupTarget(dfd int, base, p string) (tfd int, name string, done func(), err error) {
	name = base + r.opt.Suffix
	if len(name) > 255 {
		return -1, "", nil, fmt.Errorf("back up %s: %s with the suffix %q is longer than a name may be", p, base, r.opt.Suffix)
	}
	if r.besides() {
		return dfd, name, func() {}, nil
	}
	root, err := r.backupRoot(true)
	if err != nil {
		return -1, "", nil, fmt.Errorf("back up %s: %w", p, err)
	}
	d, _ := splitDir(p)
	f, err := openDirBeneath(root, d, true)
	if err != nil {
		return -1, "", nil, fmt.Errorf("back up %s to %s: %w", p, r.BackupPath(p), err)
	}
	return int(f.Fd()), name, func() { f.Close() }, nil
}

// backupAt moves the entry base of the directory dfd (p under DEST)
// aside, unless it is a directory (see backupTree) or not there (false).
// keep: it is about to be replaced by a rename over it, so it is linked
// to its backup name where it can be, and its name stays until then.
func (r *Receiver) backupAt(dfd int, base, p string, keep bool, a *aside) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return false, nil
		}
		return false, fmt.Errorf("back up %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return false, nil
	}
	tfd, name, done, err := r.backupTarget(dfd, base, p)
	if err != nil {
		return false, err
	}
	defer done()
	if err := r.moveAside(dfd, base, tfd, name, &st, keep); err != nil {
		return false, fmt.Errorf("back up %s to %s: %w", p, r.BackupPath(p), unwrapPath(err))
	}
	a.add(p)
	return true, nil
}

// moveAside moves (or with keep, links) base in dfd, as st, to name in
// tfd, replacing an older backup of that name.
func (r *Receiver) moveAside(dfd int, base string, tfd int, name string, st *unix.Stat_t, keep bool) error {
	if keep {
		tmp := TempPrefix + tmpTag + ".bak." + nextSeq()
		err := unix.Linkat(dfd, base, tfd, tmp, 0)
		if err == nil {
			if err = renameBackup(tfd, tmp, name); err != nil {
				unix.Unlinkat(tfd, tmp, 0)
			}
			return err
		}
		if err == unix.EXDEV {
			return r.copyAside(dfd, base, tfd, name, st)
		}
		// No hard link here (EPERM of protected_hardlinks, EMLINK, a
		// filesystem without them): renamed, the name empty an instant.
	}
	err := renameBackupFrom(dfd, base, tfd, name)
	if err != unix.EXDEV {
		return err
	}
	if err := r.copyAside(dfd, base, tfd, name, st); err != nil {
		return err
	}
	if keep {
		return nil
	}
	if err := unix.Unlinkat(dfd, base, 0); err != nil && err != unix.ENOENT {
		return fmt.Errorf("copied, then remove the original: %w", err)
	}
	return nil
}

// renameBackup renames tmp to name in the directory fd, over an older
// backup of that name (a directory there goes with all it holds).
func renameBackup(fd int, tmp, name string) error { return renameBackupFrom(fd, tmp, fd, name) }

func renameBackupFrom(fdir int, from string, tfd int, name string) error {
	err := unix.Renameat(fdir, from, tfd, name)
	if isDirInWay(err) {
		if err := removeAllAt(tfd, name); err != nil {
			return fmt.Errorf("a directory holds the backup's name: %w", err)
		}
		err = unix.Renameat(fdir, from, tfd, name)
	}
	return err
}

// copyAside copies base in dfd, as st, to name in tfd (another
// filesystem): under a temporary name, then renamed.
func (r *Receiver) copyAside(dfd int, base string, tfd int, name string, st *unix.Stat_t) error {
	tmp := TempPrefix + tmpTag + ".bak." + nextSeq()
	mtime := []unix.Timespec{st.Atim, st.Mtim}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if err := r.copyFileAside(dfd, base, tfd, tmp, st); err != nil {
			unix.Unlinkat(tfd, tmp, 0)
			return err
		}
	case unix.S_IFLNK:
		target, err := readlinkat(dfd, base)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(target, tfd, tmp); err != nil {
			return err
		}
		unix.UtimesNanoAt(tfd, tmp, mtime, unix.AT_SYMLINK_NOFOLLOW)
	default:
		if err := mknodat(tfd, tmp, uint32(st.Mode), unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev))); err != nil {
			return fmt.Errorf("the backup directory is on another filesystem, and this %s cannot be made there: %w", unixmode.Type(uint32(st.Mode)), err)
		}
		unix.UtimesNanoAt(tfd, tmp, mtime, unix.AT_SYMLINK_NOFOLLOW)
	}
	if canChown {
		unix.Fchownat(tfd, tmp, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW)
	}
	if err := renameBackup(tfd, tmp, name); err != nil {
		unix.Unlinkat(tfd, tmp, 0)
		return err
	}
	return nil
}

// copyFileAside copies the regular file base in dfd, still st, to the
// new file tmp in tfd: data, mode and mtime (fsynced with Fsync).
func (r *Receiver) copyFileAside(dfd int, base string, tfd int, tmp string, st *unix.Stat_t) error {
	sfd, err := unix.Openat(dfd, base, readFlags, 0)
	if err != nil {
		return err
	}
	src := os.NewFile(uintptr(sfd), base)
	defer src.Close()
	var now unix.Stat_t
	if err := unix.Fstat(sfd, &now); err != nil {
		return err
	}
	if now.Ino != st.Ino || now.Dev != st.Dev {
		return errors.New("replaced while being backed up")
	}
	wfd, err := unix.Openat(tfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	dst := os.NewFile(uintptr(wfd), tmp)
	defer dst.Close()
	if _, err := io.Copy(dst, io.LimitReader(src, now.Size)); err != nil {
		return fmt.Errorf("copy to the backup directory (another filesystem): %w", err)
	}
	if err := unix.Fchmod(wfd, uint32(now.Mode)&0o7777); err != nil {
		return err
	}
	if err := unix.UtimesNanoAt(wfd, "", []unix.Timespec{now.Atim, now.Mtim}, atEmptyPath); err != nil {
		return err
	}
	if r.opt.Fsync {
		if err := dst.Sync(); err != nil {
			return err
		}
	}
	return dst.Close()
}

// backupTree backs up the files of the directory base in dfd (p under
// DEST), which goes, and removes what it can of it: each file moved
// aside, each directory below emptied so, then removed. Backups beside
// their files (no backup directory) stay in it, and so does it: false,
// with no error. The directory is opened with no symlink followed; one
// swapped for a symlink is not followed.
func (r *Receiver) backupTree(dfd int, base, p string, a *aside) (gone bool, err error) {
	fd, err := unix.Openat(dfd, base, dirFlags, 0)
	switch err {
	case nil:
	case unix.ENOENT:
		return true, nil
	case unix.ELOOP, unix.ENOTDIR:
		return false, fmt.Errorf("back up %s: %w", p, errSymlinkInWay)
	default:
		return false, fmt.Errorf("back up %s: %w", p, err)
	}
	d := os.NewFile(uintptr(fd), p)
	defer d.Close()
	names, err := list(d, false)
	if err != nil {
		return false, fmt.Errorf("back up %s: %w", p, err)
	}
	defer names.Close()
	kept := false
	for de, err := range names.All() {
		if err != nil {
			return false, fmt.Errorf("back up %s: %w", p, err)
		}
		sub := join(p, de.name)
		if de.typ.IsDir() {
			g, err := r.backupTree(fd, de.name, sub, a)
			if err != nil {
				return false, err
			}
			kept = kept || !g
			continue
		}
		if _, err := r.backupAt(fd, de.name, sub, false, a); err != nil {
			return false, err
		}
		kept = kept || r.besides()
	}
	if kept {
		return false, nil
	}
	switch err := unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR); err {
	case nil, unix.ENOENT:
		return true, nil
	case unix.ENOTEMPTY, unix.EEXIST:
		return false, fmt.Errorf("back up %s: entries were added while it was being backed up", p)
	default:
		return false, fmt.Errorf("remove %s: %w", p, err)
	}
}

// nextSeq is a new number for a temporary name of this process.
func nextSeq() string { return strconv.FormatUint(tmpSeq.Add(1), 36) }
