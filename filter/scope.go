package filter

import (
	"strings"
	"sync"
)

// Scopes gives the walk of a tree the Dir of each directory it reads,
// reading each directory's per-directory files once, when the directory is
// entered. It keeps a Dir only for a directory whose rules differ from its
// parent's, and only while directories under it are still to be read (a
// walk that goes depth first holds about as many as the tree is deep, times
// the directories read at once). Safe for concurrent use.
type Scopes struct {
	mu   sync.Mutex
	m    map[string]*scopeNode
	top  *scopeNode // above the root
	none bool       // no dir-merge rule: every directory has top's Dir
}

type scopeNode struct {
	d    *Dir
	refs int // the directories under it still to be read, and itself while it is read
}

// NewScopes returns the Scopes of a walk of t with r.
func (r *Rules) NewScopes(t Tree) (*Scopes, error) {
	top, err := r.Top(t)
	if err != nil {
		return nil, err
	}
	return &Scopes{m: make(map[string]*scopeNode), top: &scopeNode{d: top, refs: 1}, none: !r.HasDirMerge()}, nil
}

// Scope is one directory being read.
type Scope struct {
	s      *Scopes
	dir    string
	parent *scopeNode
	pkey   string
	own    *scopeNode
	d      *Dir
}

// Enter reads the per-directory files of dir (relative to the root, "."
// for the root), a directory the walk found (the root, or one a Scope of
// its parent counted with Push), and returns its Scope. The walk calls Done
// when it has read dir, or Skip if it cannot.
func (s *Scopes) Enter(dir string) (*Scope, error) {
	if s == nil || s.none {
		var d *Dir
		if s != nil {
			d = s.top.d
		}
		return &Scope{d: d}, nil
	}
	s.mu.Lock()
	p, pkey := s.parentOf(dir)
	s.mu.Unlock()
	d, err := p.d.Sub(dir)
	sc := &Scope{s: s, dir: dir, parent: p, pkey: pkey, d: d}
	if err != nil {
		sc.Done()
		return nil, err
	}
	if d != p.d {
		sc.own = &scopeNode{d: d, refs: 1}
		s.mu.Lock()
		s.m[dir] = sc.own
		s.mu.Unlock()
	}
	return sc, nil
}

// Skip ends dir, which the walk could not read.
func (s *Scopes) Skip(dir string) {
	if s == nil || s.none {
		return
	}
	s.mu.Lock()
	p, pkey := s.parentOf(dir)
	s.release(p, pkey)
	s.mu.Unlock()
}

// parentOf returns the node dir's rules come from: that of the nearest
// directory above it with its own.
func (s *Scopes) parentOf(dir string) (*scopeNode, string) {
	if dir == "." {
		return s.top, ""
	}
	p := dir
	for {
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			p = "."
		} else {
			p = p[:i]
		}
		if n, ok := s.m[p]; ok {
			return n, p
		}
		if p == "." {
			return s.top, ""
		}
	}
}

func (s *Scopes) release(n *scopeNode, key string) {
	n.refs--
	if n.refs == 0 && n != s.top {
		delete(s.m, key)
	}
}

// Dir returns the rules in force for the names in the directory.
func (sc *Scope) Dir() *Dir { return sc.d }

// Push counts n subdirectories the walk will Enter.
func (sc *Scope) Push(n int) {
	if sc.s == nil || n == 0 {
		return
	}
	sc.s.mu.Lock()
	if sc.own != nil {
		sc.own.refs += n
	} else {
		sc.parent.refs += n
	}
	sc.s.mu.Unlock()
}

// Done ends the directory: the walk has read it and counted (Push) its
// subdirectories.
func (sc *Scope) Done() {
	if sc.s == nil {
		return
	}
	sc.s.mu.Lock()
	if sc.own != nil {
		sc.s.release(sc.own, sc.dir)
	}
	sc.s.release(sc.parent, sc.pkey)
	sc.s.mu.Unlock()
}

// Held returns how many directories' rules s keeps.
func (s *Scopes) Held() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
