package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine/event"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
)

// --stats: rsync's summary block, in rsync's words and order, with the
// figures bulkmove has (docs/rsync.md says which it has not). The files
// are the walk's (sharder.Stats); what was made, from the receivers'
// items (-i's); what was sent, from the acks; the bytes on the wire, from
// the streams' counters.

// rsyncTally is what --stats counts beyond the summary line's figures.
type rsyncTally struct {
	created   event.Kinds
	linkBytes int64 // the symlinks' targets' lengths, which rsync's total size counts
	devs      int64 // devices (-D): the walk counts them with the special files
	specials  int64
}

// countList counts, for --stats, what the walk's figures leave out: the
// symlinks' lengths, devices apart from special files. They come in the
// final batches. Under j.mu.
func (j *job) countList(r send.Result) {
	if !j.flags.Stats || !r.Final {
		return
	}
	for i := range r.Batch.Entries {
		j.countDeferred(&r.Batch.Entries[i])
	}
}

func (j *job) countDeferred(e *model.Entry) {
	switch {
	case e.Kind == model.KindSymlink:
		j.rs.linkBytes += int64(len(e.Link))
	case e.Kind.IsDevice():
		j.rs.devs++
	case e.Kind.IsSpecial():
		j.rs.specials++
	}
}

// countLink is countList for one entry of a dry run's walk.
func (j *job) countLink(e *model.Entry) {
	if j.flags.Stats {
		j.mu.Lock()
		j.countDeferred(e)
		j.mu.Unlock()
	}
}

// countCreated counts entry e, found new at DEST, among the created
// files. Under j.mu.
func (j *job) countCreated(e *model.Entry) {
	if j.flags.Stats && (!e.IsRange() || e.Off == 0) {
		addKind(&j.rs.created, e.Kind)
	}
}

func addKind(k *event.Kinds, kind model.Kind) {
	switch kind {
	case model.KindFile, model.KindHardlink:
		k.Reg++
	case model.KindDir:
		k.Dir++
	case model.KindSymlink:
		k.Link++
	case model.KindCharDevice, model.KindBlockDevice:
		k.Dev++
	case model.KindFIFO, model.KindSocket:
		k.Special++
	default:
		return
	}
	k.Total++
}

// local says whether the job's streams have no wire: the receiver is in
// this process.
func (j *job) local() bool {
	return j.remote == nil && j.serveAddr == "" && j.hub == nil && !j.flags.ViaAgent
}

// rsyncStats is --stats' figures; nil without --stats, or where the
// walk did not run.
func (j *job) rsyncStats() *event.Stats {
	w := j.walked.Load()
	if !j.flags.Stats || w == nil {
		return nil
	}
	del := j.del.Stats()
	el := time.Since(j.start).Seconds()
	j.mu.Lock()
	defer j.mu.Unlock()
	s := &event.Stats{
		Files: event.Kinds{Total: w.Files + w.Hardlinks + w.Dirs + w.Symlinks + j.rs.devs + j.rs.specials,
			Reg: w.Files + w.Hardlinks, Dir: w.Dirs, Link: w.Symlinks, Dev: j.rs.devs, Special: j.rs.specials},
		Deleted:   event.Kinds{Total: del.Deleted, Reg: del.Deleted - del.Dirs, Dir: del.Dirs},
		TotalSize: w.Bytes + j.rs.linkBytes,
	}
	if j.flags.DryRun {
		// What would be made and sent is not known: a dry run does
		// not compare with DEST.
		return s
	}
	created := j.rs.created
	s.Created = &created
	// Matched data: what the block delta found at DEST and did not send.
	files, size, matched := j.files, j.bytes, j.saved
	literal := size - matched
	s.Transferred, s.TransferredSize, s.LiteralData, s.MatchedData = &files, &size, &literal, &matched
	var sent, recv int64
	switch {
	case j.local():
		// No wire: what was sent is the data copied.
		sent = j.bytes
	case j.m != nil:
		sent, recv = j.m.WireBytes(), j.m.WireRead()
	}
	s.BytesSent, s.BytesReceived = &sent, &recv
	rate := 0.0
	if el > 0 {
		rate = float64(sent+recv) / el
	}
	s.BytesPerSecond = &rate
	if sent+recv > 0 {
		speedup := float64(s.TotalSize) / float64(sent+recv)
		s.Speedup = &speedup
	}
	return s
}

// printStats writes --stats' block on the job's stats output, as rsync
// does (with --json it is in the end event instead).
func (j *job) printStats() {
	if j.ev != nil {
		return
	}
	if s := j.rsyncStats(); s != nil {
		fmt.Fprint(j.statsOut, formatStats(s, j.flags.Human, j.flags.DryRun))
	}
}

// formatStats is rsync's --stats block for s: its numbers with thousands
// separators, or at -h (human 1 or more) in units, as rsync's -h writes
// them. A figure s has not (nil) is left out with its line; a dry run's
// last line says so, as rsync's.
func formatStats(s *event.Stats, human int, dryRun bool) string {
	lvl := 1 + human // rsync's human_readable: 1 by default, 2 with -h
	var b strings.Builder
	num := func(n int64) string { return units.BigNum(n, lvl) }
	kinds := func(what string, k event.Kinds) {
		fmt.Fprintf(&b, "%s: %s", what, units.Count(k.Total))
		var parts []string
		for _, p := range []struct {
			label string
			n     int64
		}{{"reg", k.Reg}, {"dir", k.Dir}, {"link", k.Link}, {"dev", k.Dev}, {"special", k.Special}} {
			if p.n > 0 {
				parts = append(parts, p.label+": "+units.Count(p.n))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
		}
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	kinds("Number of files", s.Files)
	if s.Created != nil {
		kinds("Number of created files", *s.Created)
	}
	kinds("Number of deleted files", s.Deleted)
	if s.Transferred != nil {
		fmt.Fprintf(&b, "Number of regular files transferred: %s\n", units.Count(*s.Transferred))
	}
	fmt.Fprintf(&b, "Total file size: %s bytes\n", num(s.TotalSize))
	for _, f := range []struct {
		label string
		n     *int64
		unit  string
	}{
		{"Total transferred file size", s.TransferredSize, " bytes"}, {"Literal data", s.LiteralData, " bytes"},
		{"Matched data", s.MatchedData, " bytes"}, {"Total bytes sent", s.BytesSent, ""}, {"Total bytes received", s.BytesReceived, ""},
	} {
		if f.n != nil {
			fmt.Fprintf(&b, "%s: %s%s\n", f.label, num(*f.n), f.unit)
		}
	}
	b.WriteByte('\n')
	if s.BytesSent != nil {
		fmt.Fprintf(&b, "sent %s bytes  received %s bytes  %s bytes/sec\n",
			num(*s.BytesSent), num(*s.BytesReceived), units.BigDNum(*s.BytesPerSecond, lvl, 2))
	}
	fmt.Fprintf(&b, "total size is %s", num(s.TotalSize))
	if s.Speedup != nil {
		fmt.Fprintf(&b, "  speedup is %s", units.BigDNum(*s.Speedup, 1, 2))
	}
	if dryRun {
		b.WriteString(" (DRY RUN)")
	}
	b.WriteByte('\n')
	return b.String()
}
