package gentree

import (
	"encoding/binary"
	"math"
	"path"
	"strconv"
	"strings"
)

// Content kinds of a Mixed tree's files, by the name's extension. Real
// trees compress: source, logs, JSON and CSV to a third or less, binary
// records to less than half, media and archives not at all. A tree of
// random bytes only shows what a tool costs when nothing compresses; a
// Mixed tree is meant to be what people move.
const (
	contentRandom  = iota // media, archives, blobs: incompressible
	contentProse          // .txt, .md, no extension: words in sentences and lines
	contentCode           // .go: indented statements
	contentLog            // .log: timestamped lines
	contentRecords        // .json, .csv: one record a line
	contentBinary         // .dat: fixed-size binary records
	contentHalf           // Half's files: half random, half a repeated line (half.go)
)

// contentOf says how the file named name is filled.
func contentOf(name string) int {
	switch ext := path.Ext(name); ext {
	case ".txt", ".md", "":
		return contentProse
	case ".go":
		return contentCode
	case ".log":
		return contentLog
	case ".json", ".csv":
		return contentRecords
	case ".dat":
		return contentBinary
	default: // .bin, .jpg, .pdf, .tmp, ...
		if strings.HasPrefix(ext, ".tmp") {
			return contentProse
		}
		return contentRandom
	}
}

// filler fills buffers with a file's content, one chunk after the other;
// the bytes do not depend on the chunking.
type filler interface{ fill(b []byte) }

// newFiller returns the content of a file of the given kind, seed and size.
func newFiller(kind int, seed uint64, size int64) filler {
	switch kind {
	case contentRandom:
		return newContent(seed)
	case contentHalf:
		return newHalf(seed, size)
	}
	return &textSource{kind: kind, x: seed ^ 0x9e3779b97f4a7c15, t: 1_700_000_000 + int64(seed%50_000_000)}
}

// textSource makes text (or binary records) a line at a time from a
// Zipf-weighted vocabulary; what does not fit a chunk waits for the next.
type textSource struct {
	kind    int
	x       uint64 // wyrand state
	t       int64  // a clock for timestamps, seconds
	n       int    // lines so far
	line    []byte
	pending []byte
}

func (s *textSource) rand() uint64 { return wyrand(&s.x) }

func (s *textSource) fill(b []byte) {
	for len(b) > 0 {
		if len(s.pending) == 0 {
			s.line = s.next(s.line[:0])
			s.pending = s.line
		}
		n := copy(b, s.pending)
		b, s.pending = b[n:], s.pending[n:]
	}
}

// word appends a word, the more common ones more often (Zipf, s≈1).
func (s *textSource) word(b []byte) []byte {
	return append(b, vocabulary[zipf[s.rand()%uint64(len(zipf))]]...)
}

// words appends n words separated by sep.
func (s *textSource) words(b []byte, n int, sep byte) []byte {
	for i := range n {
		if i > 0 {
			b = append(b, sep)
		}
		b = s.word(b)
	}
	return b
}

var levels = []string{"INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"}

var keywords = []string{"if", "for", "return", "func", "var", "switch", "case", "defer", "go"}

// next appends one line of the file's kind to b.
func (s *textSource) next(b []byte) []byte {
	r := s.rand()
	s.n++
	switch s.kind {
	case contentProse:
		n := 6 + int(r%10)
		b = s.words(b, n, ' ')
		if r>>8%4 == 0 {
			b = append(b, '.')
		} else {
			b = append(b, ',')
		}
		if r>>16%8 == 0 {
			b = append(b, '\n')
		}
		return append(b, '\n')
	case contentCode:
		depth := int(r>>4%4) + 1
		for range depth {
			b = append(b, '\t')
		}
		switch r >> 12 % 4 {
		case 0:
			b = append(b, keywords[r>>20%uint64(len(keywords))]...)
			b = append(b, ' ')
			b = s.word(b)
			b = append(b, " := "...)
			b = s.word(b)
			b = append(b, '(')
			b = s.words(b, int(r>>28%3)+1, ',')
			b = append(b, ") {\n"...)
		case 1:
			b = append(b, "}\n"...)
		case 2:
			b = append(b, "// "...)
			b = s.words(b, int(r>>28%8)+3, ' ')
			b = append(b, '\n')
		default:
			b = s.word(b)
			b = append(b, '.')
			b = s.word(b)
			b = append(b, " = "...)
			b = strconv.AppendInt(b, int64(r>>32%1000), 10)
			b = append(b, '\n')
		}
		return b
	case contentLog:
		s.t += int64(r % 3)
		b = appendTime(b, s.t, int(r>>8%1000))
		b = append(b, ' ')
		b = append(b, levels[r>>20%uint64(len(levels))]...)
		b = append(b, " ["...)
		b = s.word(b)
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(r>>24%32), 10)
		b = append(b, "] "...)
		b = s.words(b, int(r>>30%6)+2, ' ')
		b = append(b, " id="...)
		b = strconv.AppendInt(b, int64(s.n)*7919%1000003, 10)
		b = append(b, " ms="...)
		b = strconv.AppendInt(b, int64(r>>40%500), 10)
		return append(b, '\n')
	case contentRecords:
		b = append(b, `{"id":`...)
		b = strconv.AppendInt(b, int64(s.n), 10)
		b = append(b, `,"name":"`...)
		b = s.words(b, 2, ' ')
		b = append(b, `","tags":["`...)
		b = s.words(b, int(r%3)+1, ',')
		b = append(b, `"],"score":`...)
		b = strconv.AppendFloat(b, float64(r>>8%100000)/100, 'f', 2, 64)
		b = append(b, `,"active":`...)
		b = strconv.AppendBool(b, r>>30%2 == 0)
		return append(b, "}\n"...)
	default: // contentBinary: 64-byte records
		var rec [64]byte
		binary.LittleEndian.PutUint64(rec[0:], uint64(s.n))
		binary.LittleEndian.PutUint64(rec[8:], uint64(s.t)+uint64(s.n)*3)
		binary.LittleEndian.PutUint32(rec[16:], uint32(r%5000))
		binary.LittleEndian.PutUint16(rec[20:], uint16(r>>16%16))
		copy(rec[24:56], vocabulary[zipf[r>>24%uint64(len(zipf))]])
		binary.LittleEndian.PutUint32(rec[56:], uint32(r>>40))
		return append(b, rec[:]...)
	}
}

// appendTime appends t (Unix seconds) and ms as 2023-11-14T22:13:20.123Z.
func appendTime(b []byte, t int64, ms int) []byte {
	days, secs := t/86400, t%86400
	y, m, d := civil(days)
	b = appendN(b, y, 4)
	b = append(b, '-')
	b = appendN(b, m, 2)
	b = append(b, '-')
	b = appendN(b, d, 2)
	b = append(b, 'T')
	b = appendN(b, int(secs/3600), 2)
	b = append(b, ':')
	b = appendN(b, int(secs/60%60), 2)
	b = append(b, ':')
	b = appendN(b, int(secs%60), 2)
	b = append(b, '.')
	b = appendN(b, ms, 3)
	return append(b, 'Z')
}

func appendN(b []byte, v, width int) []byte {
	var d [8]byte
	for i := width - 1; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, d[:width]...)
}

// civil converts days since 1970-01-01 to a date (Howard Hinnant's algorithm).
func civil(z int64) (y, m, d int) {
	z += 719468
	era := z / 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	m = int(mp + 3)
	if m > 12 {
		m -= 12
	}
	y = int(yoe + era*400)
	if m <= 2 {
		y++
	}
	return y, m, d
}

// vocabulary is the words of text content, and zipf a table of their
// indices, each word i present about 1/(i+1) as often as the first, so
// that a uniform index into it draws words as natural text does.
var vocabulary, zipf = makeVocabulary()

func makeVocabulary() ([]string, []uint16) {
	// Syllables make a few thousand distinct, pronounceable words.
	syl := []string{"ka", "to", "ri", "mo", "ne", "sa", "lu", "pe", "di", "go",
		"an", "er", "in", "on", "ul", "ex", "ra", "ve", "st", "ch"}
	base := strings.Fields("the of and to in is that for it as with was on be by this are from or at " +
		"an not have which but all were when we there can has more if will one file data server user request " +
		"error value time system read write node client stream batch config path buffer queue status")
	words := append([]string(nil), base...)
	for i := 0; len(words) < 2048; i++ {
		w := syl[i%len(syl)] + syl[i/len(syl)%len(syl)]
		if i >= len(syl)*len(syl) {
			w += syl[i/(len(syl)*len(syl))%len(syl)]
		}
		words = append(words, w)
	}
	const size = 1 << 16
	var h float64
	for i := range words {
		h += 1 / float64(i+1)
	}
	table := make([]uint16, 0, size)
	for i := range words {
		k := int(math.Round(size / h / float64(i+1)))
		for range max(k, 1) {
			if len(table) < size {
				table = append(table, uint16(i))
			}
		}
	}
	for len(table) < size {
		table = append(table, uint16(len(words)-1))
	}
	return words, table
}
