package engine

import (
	"flag"
	"io"
	"testing"

	"github.com/bulkmove/bulkmove/sharder"
)

// TestSplitFlag: --split-size auto is the larger of 64 MiB and the batch
// size; 0 is off; and files are never split with --checksum, -X or -A.
func TestSplitFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{nil, 64 << 20},
		{[]string{"--batch-size", "256MiB"}, 256 << 20},
		{[]string{"--split-size", "16MiB"}, 16 << 20},
		{[]string{"--split-size", "0"}, 0},
		{[]string{"--split-size", "16MiB", "--split-size", "auto"}, 64 << 20},
		{[]string{"--checksum"}, 0},
		{[]string{"-X", "--split-size", "1GiB"}, 0},
		{[]string{"-A"}, 0},
	} {
		var f moveFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		var o sharder.Options
		f.split.apply(&o, &f)
		if o.SplitSize != tc.want {
			t.Errorf("%q: split size %d, want %d", tc.args, o.SplitSize, tc.want)
		}
	}
}
