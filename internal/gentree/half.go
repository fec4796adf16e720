package gentree

import "errors"

// Half writes a tree with the layout of Mixed(dir, n, seed) (the same
// names, directories, links, modes and mtimes) whose every regular file is
// half random bytes and half one line of text repeated: the first half of
// a file does not compress at all and the second to almost nothing, so
// zstd -1 halves the tree whatever the sizes, and a compressor that samples
// only the start of a file or of a stream sees nothing to gain. File sizes
// are Mixed's times 7/6: about 404 MB for n = 20,000, seed 1.
func Half(dir string, n int, seed uint64) error {
	return mixedAs(dir, n, seed, contentHalf, 7, 6)
}

// Random writes a tree with the layout and sizes of Mixed(dir, n, seed)
// whose every regular file is random bytes: nothing in it compresses.
func Random(dir string, n int, seed uint64) error {
	return mixedAs(dir, n, seed, contentRandom, 1, 1)
}

// mixedAs writes Mixed's plan with every file's content of the given kind
// and its size scaled by num/den.
func mixedAs(dir string, n int, seed uint64, kind int, num, den int64) error {
	if n < 0 {
		return errors.New("gentree: negative count")
	}
	p := planMixed(n, seed)
	for i := range p.files {
		p.files[i].kind = kind
		p.files[i].size = p.files[i].size * num / den
	}
	return p.write(dir)
}

// halfSource is a contentHalf file: size/2 (rounded up) random bytes, then
// one line of prose repeated to the end.
type halfSource struct {
	rnd    *contentSource
	random int64 // random bytes still to come
	line   []byte
	pos    int // in line
}

func newHalf(seed uint64, size int64) *halfSource {
	t := &textSource{kind: contentProse, x: seed ^ 0x6861_6c66_2d74_7874}
	return &halfSource{rnd: newContent(seed), random: (size + 1) / 2, line: t.next(nil)}
}

func (h *halfSource) fill(b []byte) {
	if h.random > 0 {
		n := int(min(int64(len(b)), h.random))
		h.rnd.fill(b[:n])
		h.random -= int64(n)
		b = b[n:]
	}
	for len(b) > 0 {
		n := copy(b, h.line[h.pos:])
		b = b[n:]
		h.pos = (h.pos + n) % len(h.line)
	}
}
