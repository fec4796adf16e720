package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/bulkmove/bulkmove/sharder"
)

// Scale take a part of the tree: --shard i/N (the i-th of N disjoint
// parts, by a hash of each directory) and --files-from FILE (exactly the
// paths it lists, as rsync's --files-from). See docs/scale-out.md.
type Scale struct {
	Shard     sharder.Shard
	FilesFrom string
	From0     bool
}

// check refuses what does not go together.
func (f *Scale) check(m *Config) error {
	if f.From0 && f.FilesFrom == "" {
		return errors.New("-0 (--from0) is for --files-from")
	}
	if f.FilesFrom != "" && m.Delete {
		return errors.New("--delete with --files-from: a list does not say what else a directory may hold; run a final --delete pass over the whole tree, without --files-from, once all parts are done (docs/scale-out.md)")
	}
	return nil
}

// journalKey is what the part adds to the default journal's key, so that
// parts of one tree do not share a journal: the shard, and the list's
// absolute path, size and mtime.
func (f *Scale) journalKey() []string {
	var k []string
	if !f.Shard.All() {
		k = append(k, "shard="+f.Shard.String())
	}
	if f.FilesFrom != "" {
		id := "-"
		if f.FilesFrom != "-" {
			id = f.FilesFrom
			if abs, err := filepath.Abs(id); err == nil {
				id = abs
			}
			if fi, err := os.Stat(f.FilesFrom); err == nil {
				id += fmt.Sprintf("\x00%d\x00%d", fi.Size(), fi.ModTime().UnixNano())
			}
		}
		k = append(k, fmt.Sprintf("files-from=%s\x00from0=%v", id, f.From0))
	}
	return k
}

// apply sets the sharder's options for the part; the returned function
// closes the list.
func (f *Scale) apply(opt *sharder.Options, stdin io.Reader) (func(), error) {
	opt.Shard = f.Shard
	if f.FilesFrom == "" {
		return func() {}, nil
	}
	opt.FilesFromNUL = f.From0
	if f.FilesFrom == "-" {
		opt.FilesFrom = stdin
		return func() {}, nil
	}
	lf, err := os.Open(f.FilesFrom)
	if err != nil {
		return nil, fmt.Errorf("--files-from: %w", err)
	}
	opt.FilesFrom = lf
	return func() { lf.Close() }, nil
}
