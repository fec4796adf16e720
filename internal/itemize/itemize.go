// Package itemize writes what a move changed of each entry as rsync's
// -i (--itemize-changes) does: an 11-character code, YXcstpoguax, and
// the path.
//
//	>f+++++++++ new.txt          a new file, its data sent (< when pushed)
//	>f.st...... changed.txt      data sent: its size and mtime differed
//	.f...p..... mode.txt         only its permission bits were set
//	cd+++++++++ newdir/          a directory made
//	.d..t...... ./               a directory's mtime set
//	cL+++++++++ link -> target   a symlink made
//	cD+++++++++ null             a device made (-D); cS: a FIFO or socket
//	cDc........ disk             a device made again: its number changed
//	*deleting   gone.txt         removed by --delete
//
// Y is what happened: '>' data received (the move's DEST, local or
// pulled), '<' data sent (a push), 'c' made or changed in place (a
// directory, a symlink, a device), '.' only attributes set. X the kind:
// f, d, L, D (a device), S (a FIFO or socket). Then c (content, by hash,
// a symlink's target, or a device's number), s (size), t (mtime),
// p (permission bits), o (owner), g (group), and u, a, x, which bulkmove
// does not report: '.' where unchanged, '+' throughout for a new entry.
//
// The line is rsync's --out-format (Format), '%i %n%L' for -i.
package itemize

import (
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// Code is the 11-character code of an entry of kind k whose receiver
// reported flags (wire.Item*); pushed: the data went to a remote host.
// "" where there is nothing to report.
func Code(k model.Kind, flags uint16, pushed bool) string {
	if flags == 0 {
		return ""
	}
	var x byte
	switch k {
	case model.KindFile, model.KindHardlink:
		x = 'f'
	case model.KindDir:
		x = 'd'
	case model.KindSymlink:
		x = 'L'
	case model.KindCharDevice, model.KindBlockDevice:
		x = 'D'
	case model.KindFIFO, model.KindSocket:
		x = 'S'
	default:
		return ""
	}
	y := byte('.')
	switch {
	case x == 'f' && flags&wire.ItemSent != 0 && pushed:
		y = '<'
	case x == 'f' && flags&wire.ItemSent != 0:
		y = '>'
	case x != 'f' && flags&(wire.ItemNew|wire.ItemContent) != 0:
		y = 'c'
	}
	if k == model.KindHardlink && flags&wire.ItemNew != 0 {
		y = 'h'
	}
	if flags&wire.ItemNew != 0 {
		return string([]byte{y, x}) + "+++++++++"
	}
	b := []byte{y, x, '.', '.', '.', '.', '.', '.', '.', '.', '.'}
	for _, f := range []struct {
		flag uint16
		at   int
		c    byte
	}{
		{wire.ItemContent, 2, 'c'}, {wire.ItemSize, 3, 's'}, {wire.ItemTime, 4, 't'},
		{wire.ItemPerms, 5, 'p'}, {wire.ItemOwner, 6, 'o'}, {wire.ItemGroup, 7, 'g'},
	} {
		if flags&f.flag != 0 {
			b[f.at] = f.c
		}
	}
	return string(b)
}

// Deleted is the code of an entry --delete removed.
const Deleted = "*deleting"
