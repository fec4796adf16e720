package receive

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// PruneResultMax is the most removed entries one prune result holds: a
// larger answer comes in several.
const PruneResultMax = 4096

// Pruning is a connection's prune in progress on the receiver: the names
// so far of a directory whose request continues in the next one
// (wire.PruneRequest.More). The zero value is ready for use; Close
// releases what it holds.
type Pruning struct {
	dir  string
	keep *extract.Keep

	// The request's filter rules, parsed once a connection, and the rules
	// in force in the directories above the last one pruned (with their
	// per-directory files at DEST: a walk goes depth first, so the next
	// directory shares most of them).
	ruleText []string
	rules    *filter.Rules
	chain    []scopeAt
}

type scopeAt struct {
	dir string
	d   *filter.Dir
}

// protection returns the rules in force in dir of DEST: the request's, with
// the per-directory files (dir-merge rules) of dir and the directories
// above it, read at DEST as rsync's receiver reads them (those above DEST
// are not read: what the sender's rules may have the receiver read stays
// under DEST).
func (p *Pruning) protection(recv *extract.Receiver, text []string, dir string) (*filter.Dir, error) {
	if p.rules == nil || !slices.Equal(text, p.ruleText) {
		rules := new(filter.Rules)
		for _, r := range text {
			if err := rules.Add(r); err != nil {
				return nil, fmt.Errorf("%w: %v", wire.ErrProtocol, err)
			}
		}
		top, err := rules.Top(filter.Tree{Root: recv.Dir(), Read: recv.ReadRulesFile, NoParents: true, Secret: true})
		if err != nil {
			return nil, err
		}
		p.ruleText, p.rules, p.chain = slices.Clone(text), rules, []scopeAt{{dir: "", d: top}}
	}
	// The chain holds "" (above the root), ".", then each directory down
	// to the last one asked for: keep what is above dir.
	want := []string{"."}
	if dir != "." {
		for i := 0; i <= len(dir); i++ {
			if i == len(dir) || dir[i] == '/' {
				want = append(want, dir[:i])
			}
		}
	}
	n := 1
	for n < len(p.chain) && n-1 < len(want) && p.chain[n].dir == want[n-1] {
		n++
	}
	p.chain = p.chain[:n]
	for _, w := range want[n-1:] {
		d, err := p.chain[len(p.chain)-1].d.Sub(w)
		if err != nil {
			return nil, err
		}
		p.chain = append(p.chain, scopeAt{dir: w, d: d})
	}
	return p.chain[len(p.chain)-1].d, nil
}

// Close drops a directory's names left by a request that was never
// continued (the sender stopped).
func (p *Pruning) Close() error {
	err := p.keep.Close()
	p.keep, p.dir = nil, ""
	return err
}

// ApplyPrune carries out a prune request on a receiver: in each directory,
// everything the request does not name goes, except what the request's
// filter rules protect. A request that continues (More) only adds its last
// directory's names to p, to be pruned by the request that ends it. A bad
// rule or a continuation of another directory fails the request; a path
// that cannot be deleted is reported in the result. Each time the result
// holds PruneResultMax removed entries, it goes to send with More set and
// a new one begins (send nil: one result, however large); the last is
// returned. An error from send stops the prune and is returned.
//
// A CountOnly request removes and lists nothing: its result has the
// counts alone, and with Candidates each entry of a directory that would
// go (extract.Removed's Top) with its kind. An Exact request removes the
// entries it names, as extract.PruneNames does, without listing their
// directories. A request with a Limit removes at most that many entries,
// all its directories together; the rest it counts as held.
func ApplyPrune(recv *extract.Receiver, p *Pruning, req *wire.PruneRequest, send func(*wire.PruneResult) error) (*wire.PruneResult, error) {
	opt := extract.PruneOptions{DryRun: req.DryRun || req.CountOnly}
	ruleList := req.Rules
	if r := recv.BackupRule(req.DeleteExcluded); r != "" {
		ruleList = append(slices.Clip(ruleList), r) // after the sender's, as rsync adds it
	}
	res := &wire.PruneResult{ID: req.ID}
	left := int64(min(req.Limit, math.MaxInt64)) // of the limit; 0: none
	for i, d := range req.Dirs {
		if p.keep != nil && (i > 0 || d.Dir != p.dir || req.Exact) {
			dir := p.dir
			p.Close()
			return nil, fmt.Errorf("%w: the names of %s continued by a prune of %s", wire.ErrProtocol, dir, d.Dir)
		}
		var err error
		if !req.Exact {
			if p.keep == nil {
				p.keep, p.dir = extract.NewKeep(), d.Dir
			}
			err = p.keep.Add(d.Names...)
		}
		if req.More && i == len(req.Dirs)-1 {
			// The rest of its names come next. A failure to keep these
			// sticks (Keep): the last part reports it and deletes nothing.
			return res, nil
		}
		var sendErr error
		if err == nil && len(ruleList) > 0 {
			var rules *filter.Dir
			rules, err = p.protection(recv, ruleList, d.Dir)
			if errors.Is(err, wire.ErrProtocol) {
				p.Close()
				return nil, err
			}
			opt.Protect = func(p string, isDir bool) bool { return rules.Protected(p, isDir, req.DeleteExcluded) }
		}
		if err == nil {
			opt.Limit = 0
			if req.Limit > 0 {
				opt.Limit = max(left, 0)
				if left == 0 {
					opt.Limit, opt.DryRun = 0, true // spent: count what is held
				}
			}
			report := func(r extract.Removed) error {
				if req.Limit > 0 && left == 0 {
					return nil
				}
				res.Count++
				if req.CountOnly && (!req.Candidates || !r.Top) {
					return nil
				}
				e := wire.PrunedEntry{Path: r.Path, IsDir: r.IsDir, Backup: r.Backup}
				if req.Candidates {
					e.Kind = kindOf(r.Type)
				}
				res.Removed = append(res.Removed, e)
				if send != nil && len(res.Removed) >= PruneResultMax {
					res.More = true
					if sendErr = send(res); sendErr != nil {
						return sendErr
					}
					res = &wire.PruneResult{ID: req.ID}
				}
				return nil
			}
			var n extract.PruneCount
			if req.Exact {
				n, err = recv.PruneNames(d.Dir, candidates(d), opt, report)
			} else {
				n, err = recv.PruneDir(d.Dir, p.keep, opt, report)
			}
			res.Examined += uint64(n.Examined)
			res.Held += uint64(n.Held)
			if req.Limit > 0 {
				if left == 0 {
					res.Held += uint64(n.Removed)
				} else {
					left -= n.Removed
				}
			}
		}
		p.Close()
		if sendErr != nil {
			return nil, sendErr
		}
		if err != nil {
			res.Errors = append(res.Errors, err.Error())
		}
	}
	return res, nil
}

// kindOf is the wire's kind of an entry of type t.
func kindOf(t fs.FileMode) wire.EntryKind {
	switch t.Type() {
	case 0:
		return wire.KindFile
	case fs.ModeDir:
		return wire.KindDir
	case fs.ModeSymlink:
		return wire.KindSymlink
	}
	return wire.KindOther
}

// candidates is what an Exact request names in d.
func candidates(d wire.PruneDir) []extract.Candidate {
	cs := make([]extract.Candidate, len(d.Names))
	for i, name := range d.Names {
		t := fs.ModeIrregular // no kind: matches no file, directory or link
		if i < len(d.Kinds) {
			switch d.Kinds[i] {
			case wire.KindFile:
				t = 0
			case wire.KindDir:
				t = fs.ModeDir
			case wire.KindSymlink:
				t = fs.ModeSymlink
			}
		}
		cs[i] = extract.Candidate{Name: name, Type: t}
	}
	return cs
}
