package journal

import "math/bits"

// slot is one recorded file.
type slot struct{ key, fp uint64 }

// index maps a path hash to the fingerprint last recorded for it. It is
// built once and then only read: the slots of bucket b are
// slots[off[b]:off[b+1]], in file order, and a hash's bucket is given by its
// high bits (a multiply-shift onto the bucket count, so any count works).
// With about eight slots a bucket it costs 16.5 bytes a slot, and a lookup
// reads one offset pair and about two cache lines of slots.
type index struct {
	slots []slot
	off   []uint32
	nb    uint64 // number of buckets; 0 for an empty index
}

// slotsPerBucket is the mean bucket size aimed at when the number of slots
// is known exactly (the offsets cost 4/slotsPerBucket bytes a slot).
const slotsPerBucket = 8

func bucketOf(h, nb uint64) uint64 {
	hi, _ := bits.Mul64(h, nb)
	return hi
}

func (x *index) lookup(h uint64) (fp uint64, ok bool) {
	if x.nb == 0 {
		return 0, false
	}
	b := bucketOf(h, x.nb)
	lo, hi := x.off[b], x.off[b+1]
	for i := hi; i > lo; i-- { // backwards: the last record of a path wins
		if s := &x.slots[i-1]; s.key == h {
			return s.fp, true
		}
	}
	return 0, false
}

// builder makes an index in two passes over the same hashes: count each,
// alloc, then place each in the same order.
type builder struct {
	x index
}

// newBuilder sizes the buckets for at most max slots.
func newBuilder(max int64) *builder {
	nb := uint64(max/slotsPerBucket) + 1
	// off[b+2] counts bucket b in the first pass; see alloc.
	return &builder{x: index{nb: nb, off: make([]uint32, nb+2)}}
}

func (b *builder) count(h, _ uint64) { b.x.off[bucketOf(h, b.x.nb)+2]++ }

// alloc turns the counts into start offsets, off[b+1] being bucket b's
// start, and allocates the slots.
func (b *builder) alloc() {
	off := b.x.off
	for i := 2; i < len(off); i++ {
		off[i] += off[i-1]
	}
	b.x.slots = make([]slot, off[len(off)-1])
}

// place puts a slot at its bucket's cursor, off[b+1], and moves the cursor
// on; once all are placed, off[b+1] is the end of bucket b, which is the
// start of b+1, and off[0] is 0: bucket b is slots[off[b]:off[b+1]].
func (b *builder) place(h, fp uint64) {
	c := &b.x.off[bucketOf(h, b.x.nb)+1]
	b.x.slots[*c] = slot{h, fp}
	*c++
}

func (b *builder) index() index {
	x := b.x
	x.off = x.off[:x.nb+1]
	if len(x.slots) == 0 {
		return index{}
	}
	return x
}
