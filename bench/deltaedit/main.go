// Command deltaedit changes files the way the delta benchmark (bench/delta.sh)
// needs: deterministic edits in place, at random unaligned offsets, or a tail
// appended.
//
//	deltaedit -frac 0.01 -runs 16 -seed 1 FILE...  # change 1% of each file's bytes in 16 runs
//	deltaedit -grow 10MiB -seed 1 FILE...          # append 10 MiB of random bytes to each
//
// An edit's runs do not overlap or touch, start at any byte offset, and are of
// equal length (the last takes the remainder); every byte in a run is XORed
// with a random non-zero byte, so every one of them changes. The offsets and
// the new bytes depend only on -seed, the file's position among the arguments
// and its size. A line per file goes to stderr (the runs' offsets) unless -q.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"

	"github.com/bulkmove/bulkmove/internal/units"
)

func main() {
	frac := flag.Float64("frac", 0.01, "share of each file's bytes to change")
	runs := flag.Int("runs", 16, "number of runs the changed bytes come in")
	grow := flag.String("grow", "", "append this many random bytes instead of editing (e.g. 10MiB)")
	seed := flag.Uint64("seed", 1, "seed of the offsets and bytes")
	quiet := flag.Bool("q", false, "no line per file on stderr")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: deltaedit [-frac F -runs N | -grow SIZE] [-seed S] [-q] FILE...")
		os.Exit(2)
	}
	var add int64
	if *grow != "" {
		var err error
		if add, err = units.ParseSize(*grow, units.BareBytes); err != nil || add <= 0 {
			fatalf("-grow %q: not a positive size", *grow)
		}
	} else if *frac <= 0 || *frac > 0.5 || *runs < 1 {
		fatalf("-frac must be in (0, 0.5] and -runs at least 1")
	}
	for i, name := range flag.Args() {
		rng := rand.New(rand.NewPCG(*seed, uint64(i)))
		var msg string
		var err error
		if add > 0 {
			err = appendRandom(name, add, rng)
			msg = fmt.Sprintf("%s: %d bytes appended", name, add)
		} else {
			var rs []run
			rs, err = edit(name, *frac, *runs, rng)
			msg = fmt.Sprintf("%s: %s", name, describe(rs))
		}
		if err != nil {
			fatalf("%v", err)
		}
		if !*quiet {
			fmt.Fprintln(os.Stderr, "deltaedit:", msg)
		}
	}
}

type run struct{ off, n int64 }

// plan returns runs of a file of size bytes: count runs, frac of its bytes in
// all, at random offsets, none overlapping or touching another.
func plan(size int64, frac float64, count int, rng *rand.Rand) ([]run, error) {
	total := int64(float64(size) * frac)
	if total < int64(count) {
		return nil, fmt.Errorf("%d bytes: too small for %d runs of %g of it", size, count, frac)
	}
	each := total / int64(count)
	rs := make([]run, 0, count)
	for i := 0; i < count; i++ {
		n := each
		if i == count-1 {
			n = total - each*int64(count-1)
		}
		for tries := 0; ; tries++ {
			if tries > 10000 {
				return nil, fmt.Errorf("%d bytes: no room for %d runs of %d bytes", size, count, each)
			}
			r := run{rng.Int64N(size - n + 1), n}
			if !slices.ContainsFunc(rs, func(o run) bool { return r.off <= o.off+o.n && o.off <= r.off+r.n }) {
				rs = append(rs, r)
				break
			}
		}
	}
	slices.SortFunc(rs, func(a, b run) int { return int(a.off - b.off) })
	return rs, nil
}

// edit XORs each byte of the planned runs of name with a random non-zero byte.
func edit(name string, frac float64, count int, rng *rand.Rand) ([]run, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	rs, err := plan(fi.Size(), frac, count, rng)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	for _, r := range rs {
		b := make([]byte, r.n)
		if _, err := f.ReadAt(b, r.off); err != nil {
			return nil, fmt.Errorf("%s: read at %d: %v", name, r.off, err)
		}
		for i := range b {
			b[i] ^= byte(1 + rng.IntN(255))
		}
		if _, err := f.WriteAt(b, r.off); err != nil {
			return nil, fmt.Errorf("%s: write at %d: %v", name, r.off, err)
		}
	}
	return rs, f.Close()
}

func appendRandom(name string, n int64, rng *rand.Rand) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n > 0 {
		b := buf[:min(int64(len(buf)), n)]
		for i := 0; i+8 <= len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
		}
		for i := len(b) &^ 7; i < len(b); i++ {
			b[i] = byte(rng.Uint32())
		}
		if _, err := f.Write(b); err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		n -= int64(len(b))
	}
	return f.Close()
}

func describe(rs []run) string {
	var all int64
	offs := make([]string, len(rs))
	for i, r := range rs {
		all += r.n
		offs[i] = fmt.Sprint(r.off)
	}
	return fmt.Sprintf("%d bytes changed in %d runs of about %d, at %s", all, len(rs), rs[0].n, strings.Join(offs, " "))
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "deltaedit: "+format+"\n", args...)
	os.Exit(1)
}
