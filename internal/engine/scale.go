package engine

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/bulkmove/bulkmove/sharder"
)

// scaleFlags take a part of the tree: --shard i/N (the i-th of N disjoint
// parts, by a hash of each directory) and --files-from FILE (exactly the
// paths it lists, as rsync's --files-from). See docs/scale-out.md.
type scaleFlags struct {
	shard     sharder.Shard
	filesFrom string
	from0     bool
}

func (f *scaleFlags) register(fs *flag.FlagSet) {
	fs.Func("shard", "take the `i/N`-th of N disjoint parts of SRC (0 <= i < N; by a hash of each directory's path), so N processes cover SRC once", func(s string) error {
		sh, err := sharder.ParseShard(s)
		if err != nil {
			return err
		}
		f.shard = sh
		return nil
	})
	fs.StringVar(&f.filesFrom, "files-from", "", "move exactly the paths `FILE` lists (relative to SRC, one a line; - is stdin), with their parent directories, without recursing into listed directories (rsync's --files-from)")
	fs.BoolVar(&f.from0, "0", false, "the --files-from list is NUL-separated")
	fs.BoolVar(&f.from0, "from0", false, "the --files-from list is NUL-separated")
}

// check refuses what does not go together.
func (f *scaleFlags) check(m *moveFlags) error {
	if f.from0 && f.filesFrom == "" {
		return errors.New("-0 (--from0) is for --files-from")
	}
	if f.filesFrom != "" && m.delete {
		return errors.New("--delete with --files-from: a list does not say what else a directory may hold; run a final --delete pass over the whole tree, without --files-from, once all parts are done (docs/scale-out.md)")
	}
	return nil
}

// journalKey is what the part adds to the default journal's key, so that
// parts of one tree do not share a journal: the shard, and the list's
// absolute path, size and mtime.
func (f *scaleFlags) journalKey() []string {
	var k []string
	if !f.shard.All() {
		k = append(k, "shard="+f.shard.String())
	}
	if f.filesFrom != "" {
		id := "-"
		if f.filesFrom != "-" {
			id = f.filesFrom
			if abs, err := filepath.Abs(id); err == nil {
				id = abs
			}
			if fi, err := os.Stat(f.filesFrom); err == nil {
				id += fmt.Sprintf("\x00%d\x00%d", fi.Size(), fi.ModTime().UnixNano())
			}
		}
		k = append(k, fmt.Sprintf("files-from=%s\x00from0=%v", id, f.from0))
	}
	return k
}

// hubArgs are the flags a send-hub (the sending end of a pull) needs.
func (f *scaleFlags) hubArgs() []string {
	if f.shard.All() {
		return nil
	}
	return []string{"--shard", f.shard.String()}
}

// apply sets the sharder's options for the part; the returned function
// closes the list.
func (f *scaleFlags) apply(opt *sharder.Options, stdin io.Reader) (func(), error) {
	opt.Shard = f.shard
	if f.filesFrom == "" {
		return func() {}, nil
	}
	opt.FilesFromNUL = f.from0
	if f.filesFrom == "-" {
		opt.FilesFrom = stdin
		return func() {}, nil
	}
	lf, err := os.Open(f.filesFrom)
	if err != nil {
		return nil, fmt.Errorf("--files-from: %w", err)
	}
	opt.FilesFrom = lf
	return func() { lf.Close() }, nil
}
