package engine

import (
	"flag"
	"strconv"

	"github.com/bulkmove/bulkmove/sharder"
)

// splitFlag is --split-size: files larger than it are cut into ranges that
// several streams carry (see sharder.Options.SplitSize
// and receive/extract/partial.go). auto (the default) is the larger of
// 64 MiB and the batch size; 0 turns splitting off.
type splitFlag struct {
	size int64 // -1: auto
}

// autoSplitMin is the smallest split size auto chooses: a range is a
// batch, and a batch costs a round trip and a commit.
const autoSplitMin = 64 << 20

func (f *splitFlag) register(fs *flag.FlagSet) {
	f.size = -1
	fs.Var(f, "split-size", "cut files larger than `SIZE` into ranges of SIZE that several streams carry, written into one preallocated temporary and renamed when all have landed; auto: the larger of 64MiB and --batch-size; 0 or off: never split")
}

func (f *splitFlag) String() string {
	if f == nil || f.size < 0 {
		return "auto"
	}
	return strconv.FormatInt(f.size, 10)
}

func (f *splitFlag) Set(s string) error {
	switch s {
	case "auto":
		f.size = -1
		return nil
	case "0", "off":
		f.size = 0
		return nil
	}
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	f.size = n
	return nil
}

// apply sets the walk's split size. Files are not split where their
// ranges could not carry what the options ask of a file: content hashes
// of whole files (--checksum), extended attributes and ACLs (-X, -A).
func (f *splitFlag) apply(o *sharder.Options, m *moveFlags) {
	if m.checksum || m.faithful.xattrs || m.faithful.acls {
		return
	}
	n := f.size
	if n < 0 {
		n = max(autoSplitMin, int64(m.batchSize))
	}
	o.SplitSize = n
}
