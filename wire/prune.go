package wire

// PruneRequest asks the receiver to delete, in each listed directory, what
// the source does not have (--delete). Rules are the job's filter rules
// (rsync syntax, as filter.Rules.List gives them): an extra entry they
// exclude is protected unless DeleteExcluded.
//
// A directory with more names than one request should carry is sent in
// several, one after the other on the same connection: each but the last
// has More set, and its last directory is continued by the next request,
// whose only directory it is. The receiver prunes it once the last part
// has arrived.
//
// The receiver counts what it examines and what it removes (the --delete
// guard's counts, PruneResult.Examined and Count): CountOnly asks for the
// counts alone, nothing removed and nothing listed, so that the sender
// can refuse a catastrophic pass before any entry goes. Limit, if above
// 0, is the most entries the request may remove (--max-delete).
//
// So that the guard costs one listing of SRC and of DEST, not two, a
// count can ask for Candidates: its results then list, in Removed, each
// entry of a listed directory that would go (not what lies inside one
// that would), with its kind. A later Exact request names those entries
// (Names are then what goes, not what stays, each with its kind in
// Kinds): each is removed if it is still there and of the same kind,
// and left alone otherwise; its directory is not listed.
type PruneRequest struct {
	ID             uint64
	DryRun         bool
	DeleteExcluded bool
	More           bool
	CountOnly      bool
	Candidates     bool
	Exact          bool
	Limit          uint64
	Rules          []string
	Dirs           []PruneDir
}

// PruneDir is one source directory and the names it holds (in an Exact
// request: the names to remove, and their kinds).
type PruneDir struct {
	Dir   string
	Names []string
	Kinds []EntryKind // Exact only: one per name
}

// EntryKind is the kind of a destination entry a prune names.
type EntryKind = byte

// The kinds of entry.
const (
	KindFile EntryKind = iota
	KindDir
	KindSymlink
	KindOther
)

// PruneResult is the receiver's answer: what it removed (or, in a dry
// run, would remove) and what it could not. An answer that removes many
// entries comes in several results, each but the last with More set.
// The counts are of the part of the answer each result covers: summed
// over a pass, Examined is every entry of DEST looked at (protected ones
// not counted), Count every one removed (or that would be: CountOnly,
// DryRun), Held every one the request's Limit kept.
type PruneResult struct {
	ID       uint64
	More     bool
	Removed  []PrunedEntry
	Errors   []string
	Examined uint64
	Count    uint64
	Held     uint64
}

// PrunedEntry is one removed path. Kind is set (and IsDir follows it)
// in a Candidates count's results; elsewhere IsDir alone says.
type PrunedEntry struct {
	Path  string
	IsDir bool
	Kind  EntryKind
	// Backup: moved aside (ReceiveOptions.Backup), not deleted.
	Backup bool
}

// prunedBackup, set in a removed entry's kind byte, is its Backup.
const prunedBackup = 0x80

// Limits of a prune request.
const (
	MaxPruneNames = 1 << 20 // names in one request, all directories together
	MaxRules      = 1 << 12
)

const (
	pruneDryRun = 1 << iota
	pruneDeleteExcluded
	pruneMore
	pruneCountOnly
	pruneLimit
	pruneCandidates
	pruneExact
)

// EncodePrune encodes a prune request.
func EncodePrune(r *PruneRequest) []byte {
	e := enc{}
	e.uvarint(r.ID)
	var fl uint64
	if r.DryRun {
		fl |= pruneDryRun
	}
	if r.DeleteExcluded {
		fl |= pruneDeleteExcluded
	}
	if r.More {
		fl |= pruneMore
	}
	if r.CountOnly {
		fl |= pruneCountOnly
	}
	if r.Limit > 0 {
		fl |= pruneLimit
	}
	if r.Candidates {
		fl |= pruneCandidates
	}
	if r.Exact {
		fl |= pruneExact
	}
	e.uvarint(fl)
	if r.Limit > 0 {
		e.uvarint(r.Limit)
	}
	e.uvarint(uint64(len(r.Rules)))
	for _, x := range r.Rules {
		e.bytes(x)
	}
	e.uvarint(uint64(len(r.Dirs)))
	for _, d := range r.Dirs {
		e.bytes(d.Dir)
		e.uvarint(uint64(len(d.Names)))
		for i, n := range d.Names {
			if r.Exact {
				k := KindOther // matches no file, directory or link: left alone
				if i < len(d.Kinds) {
					k = d.Kinds[i]
				}
				e.b = append(e.b, k)
			}
			e.bytes(n)
		}
	}
	return e.b
}

// DecodePrune decodes and bounds-checks a prune request.
func DecodePrune(p []byte) (*PruneRequest, error) {
	d := dec{b: p}
	r := &PruneRequest{ID: d.uvarint("prune id")}
	fl := d.uvarint("prune flags")
	r.DryRun, r.DeleteExcluded, r.More = fl&pruneDryRun != 0, fl&pruneDeleteExcluded != 0, fl&pruneMore != 0
	r.CountOnly = fl&pruneCountOnly != 0
	r.Candidates, r.Exact = fl&pruneCandidates != 0, fl&pruneExact != 0
	if fl&^(pruneDryRun|pruneDeleteExcluded|pruneMore|pruneCountOnly|pruneLimit|pruneCandidates|pruneExact) != 0 {
		return nil, protoErr("prune request flags %#x: unknown", fl)
	}
	if r.Candidates && !r.CountOnly || r.Exact && (r.More || r.Candidates) {
		return nil, protoErr("prune request flags %#x: Candidates without CountOnly, or Exact with More or Candidates", fl)
	}
	if fl&pruneLimit != 0 {
		if r.Limit = d.uvarint("prune limit"); d.err == nil && r.Limit == 0 {
			return nil, protoErr("prune request limit 0")
		}
	}
	n := d.count("rule count", MaxRules)
	for range n {
		r.Rules = append(r.Rules, d.str("rule", MaxPath))
	}
	total := uint64(0)
	nd := d.count("directory count", MaxPruneNames)
	for range nd {
		pd := PruneDir{Dir: d.str("directory", MaxPath)}
		nn := d.count("name count", MaxPruneNames)
		if total += nn; total > MaxPruneNames {
			return nil, protoErr("prune request names more than %d entries", MaxPruneNames)
		}
		pd.Names = make([]string, 0, nn)
		if r.Exact {
			pd.Kinds = make([]EntryKind, 0, nn)
		}
		for range nn {
			if r.Exact {
				k := d.byte1("entry kind")
				if k > KindOther && d.err == nil {
					d.err = protoErr("prune entry kind %d: unknown", k)
				}
				pd.Kinds = append(pd.Kinds, k)
			}
			pd.Names = append(pd.Names, d.str("name", 255))
		}
		r.Dirs = append(r.Dirs, pd)
	}
	if err := d.done("prune request"); err != nil {
		return nil, err
	}
	if r.More && len(r.Dirs) == 0 {
		return nil, protoErr("prune request continued with no directory")
	}
	return r, nil
}

// EncodePruned encodes a prune result.
func EncodePruned(r *PruneResult) []byte {
	e := enc{}
	e.uvarint(r.ID)
	var fl uint64
	if r.More {
		fl |= pruneMore
	}
	e.uvarint(fl)
	e.uvarint(uint64(len(r.Removed)))
	for _, x := range r.Removed {
		k := x.Kind
		if x.IsDir {
			k = KindDir
		}
		if x.Backup {
			k |= prunedBackup
		}
		e.b = append(e.b, k)
		e.bytes(x.Path)
	}
	e.uvarint(uint64(len(r.Errors)))
	for _, x := range r.Errors {
		e.bytes(truncate(x))
	}
	e.uvarint(r.Examined)
	e.uvarint(r.Count)
	e.uvarint(r.Held)
	return e.b
}

// DecodePruned decodes and bounds-checks a prune result.
func DecodePruned(p []byte) (*PruneResult, error) {
	d := dec{b: p}
	r := &PruneResult{ID: d.uvarint("prune id")}
	r.More = d.uvarint("prune result flags")&pruneMore != 0
	n := d.count("removed count", MaxFrame/2)
	for range n {
		k := d.byte1("removed kind")
		bak := k&prunedBackup != 0
		k &^= prunedBackup
		if k > KindOther && d.err == nil {
			d.err = protoErr("removed entry kind %d: unknown", k)
		}
		r.Removed = append(r.Removed, PrunedEntry{IsDir: k == KindDir, Kind: k, Path: d.str("removed path", MaxPath), Backup: bak})
	}
	ne := d.count("error count", MaxFrame/2)
	for range ne {
		r.Errors = append(r.Errors, d.str("error", MaxMessage))
	}
	r.Examined, r.Count, r.Held = d.uvarint("examined count"), d.uvarint("removed count"), d.uvarint("held count")
	if err := d.done("prune result"); err != nil {
		return nil, err
	}
	return r, nil
}

// count reads a count that must be at most max and no more than the bytes
// left (each counted item takes at least one byte).
func (d *dec) count(what string, max uint64) uint64 {
	n := d.uvarint(what)
	if d.err == nil && (n > max || n > uint64(len(d.b))) {
		d.err = protoErr("%s %d is over the limit or the frame", what, n)
	}
	if d.err != nil {
		return 0
	}
	return n
}
