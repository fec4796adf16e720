package extract

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// tarSeeds are archives of every kind of header the fast path must take
// or leave to archive/tar: plain USTAR files (the sender's fast path),
// PAX records and a global header, long names, links, GNU format, an
// empty archive, and truncations of them.
func tarSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	mk := func(hdrs ...*tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range hdrs {
			if err := tw.WriteHeader(h); err != nil {
				tb.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				tw.Write(bytes.Repeat([]byte{'x'}, int(h.Size)))
			}
		}
		tw.Close()
		return b.Bytes()
	}
	mt := time.Unix(1_700_000_000, 0)
	file := func(name string, size int64) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: mt, Format: tar.FormatUSTAR}
	}
	pax := file("with-xattr", 3)
	pax.Format, pax.PAXRecords = tar.FormatPAX, map[string]string{"SCHILY.xattr.user.a": "b"}
	gnu := file("gnu", 2)
	gnu.Format = tar.FormatGNU
	seeds := [][]byte{
		{},
		mk(file("a", 0), file("dir/b", 1), file("c", 511), file("d", 512), file("e", 513)),
		mk(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "batch", PAXRecords: map[string]string{"BULKMOVE.batch": "7"}}, file("f", 10), pax, file("g", 3)),
		mk(file(strings.Repeat("long/", 30)+"name", 5), file("h", 1)),
		mk(&tar.Header{Typeflag: tar.TypeSymlink, Name: "s", Linkname: "t", ModTime: mt}, file("i", 1)),
		mk(gnu, file("j", 1)),
	}
	for _, s := range seeds[1:3] {
		seeds = append(seeds, s[:len(s)-1024], s[:700], s[:512+100])
	}
	return seeds
}

// readTar reads every entry of an archive (at most 64) with next and read,
// taking the whole body of every other entry and a part of the others, and
// describes what it got.
func readTar(next func() (*tar.Header, error), read io.Reader) []string {
	var out []string
	for k := range 64 {
		h, err := next()
		if err != nil {
			return append(out, "error: "+err.Error())
		}
		c := *h
		c.Format = 0 // (the fast path does not say)
		out = append(out, fmt.Sprintf("%+v", c))
		var body []byte
		if k%2 == 0 {
			body, err = io.ReadAll(read)
		} else {
			body = make([]byte, 100)
			var n int
			n, err = io.ReadFull(read, body)
			body = body[:n]
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				err = nil // a body shorter than 100
			}
		}
		out = append(out, fmt.Sprintf("body %q", body))
		if err != nil {
			return append(out, "body error: "+err.Error())
		}
	}
	return out
}

func checkTarReader(t *testing.T, in []byte) {
	std := tar.NewReader(bytes.NewReader(in))
	want := readTar(std.Next, std)
	ours := newTarReader(bytes.NewReader(in))
	got := readTar(ours.Next, ours)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("archive/tar read:\n%s\nthe fast reader:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
}

// TestTarReaderSeeds: the fast reader reads each seed as archive/tar does,
// and takes the sender's plain headers itself.
func TestTarReaderSeeds(t *testing.T) {
	for _, s := range tarSeeds(t) {
		checkTarReader(t, s)
	}
	r := newTarReader(bytes.NewReader(tarSeeds(t)[1]))
	n := 0
	for {
		if _, err := r.Next(); err != nil {
			break
		}
		if r.tr != nil {
			t.Errorf("entry %d went to archive/tar", n)
		}
		n++
	}
	if n != 5 {
		t.Errorf("%d entries, want 5", n)
	}
}

// FuzzTarReader: whatever the bytes, the fast reader gives the same
// headers, bodies and errors as archive/tar. Each input is read as it is,
// and again with the checksum of every USTAR-looking block made right
// (few mutations keep a block's checksum, and without one neither reader
// gets past the header).
func FuzzTarReader(f *testing.F) {
	for _, s := range tarSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkTarReader(t, in)
		checkTarReader(t, fixSums(in))
	})
}

// fixSums returns in with a right checksum in each 512-byte block that
// carries the USTAR magic.
func fixSums(in []byte) []byte {
	out := bytes.Clone(in)
	for off := 0; off+512 <= len(out); off += 512 {
		b := out[off : off+512]
		if string(b[257:263]) != "ustar\x00" {
			continue
		}
		copy(b[148:156], "        ")
		var sum int
		for _, c := range b {
			sum += int(c)
		}
		copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	}
	return out
}
