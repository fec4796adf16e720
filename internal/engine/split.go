package engine

import (
	"strconv"

	"github.com/bulkmove/bulkmove/sharder"
)

// SplitSize is --split-size: files larger than it are cut into ranges that
// several streams carry (see sharder.Options.SplitSize
// and receive/extract/partial.go). auto (the default) is the larger of
// 64 MiB and the batch size; 0 turns splitting off.
type SplitSize struct {
	Size int64 // -1: auto
}

// autoSplitMin is the smallest split size auto chooses: a range is a
// batch, and a batch costs a round trip and a commit.
const autoSplitMin = 64 << 20

func (f *SplitSize) String() string {
	if f == nil || f.Size < 0 {
		return "auto"
	}
	return strconv.FormatInt(f.Size, 10)
}

func (f *SplitSize) Type() string { return "size" }

func (f *SplitSize) Set(s string) error {
	switch s {
	case "auto":
		f.Size = -1
		return nil
	case "0", "off":
		f.Size = 0
		return nil
	}
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	f.Size = n
	return nil
}

// apply sets the walk's split size. Files are not split where their
// ranges could not carry what the options ask of a file: content hashes
// of whole files (--checksum), extended attributes and ACLs (-X, -A); nor,
// unless --split-size says so, with --inplace: the ranges of a file each
// land in its partial, a second copy of the file, where --inplace is
// asked for a DEST without room for one (docs/delta.md).
func (f *SplitSize) apply(o *sharder.Options, m *Config) {
	if m.Checksum || m.Faithful.Xattrs || m.Faithful.ACLs {
		return
	}
	n := f.Size
	if n < 0 && m.InPlace {
		return
	}
	if n < 0 {
		n = max(autoSplitMin, int64(m.BatchSize))
	}
	o.SplitSize = n
}
