package sharder

import (
	"fmt"
	"path"
	"strings"
)

// excludePattern is one compiled --exclude pattern.
type excludePattern struct {
	pat     string // path.Match pattern, without leading or trailing '/'
	dirOnly bool   // the pattern ended in '/': it matches directories only
	whole   bool   // the pattern contained a '/': match the whole relative path
}

// excluder matches relative, slash-separated paths against exclude patterns:
//
//   - a pattern without '/' matches the base name at any depth ("*.o", "node_modules");
//   - a pattern containing '/' matches the whole path relative to the source root
//     ("build/*.tmp", "a/b"); a leading '/' only anchors it at the root ("/build"
//     matches the top-level build and nothing deeper);
//   - a pattern ending in '/' matches directories only ("cache/").
//
// Patterns use path.Match syntax ('*', '?', '[...]', '\\'); '*' never crosses a '/',
// and there is no '**'. An excluded directory is not descended into, so everything
// under it is excluded as well.
type excluder struct {
	pats []excludePattern
}

// newExcluder compiles patterns; it rejects empty and malformed ones.
func newExcluder(patterns []string) (*excluder, error) {
	x := &excluder{}
	for _, raw := range patterns {
		p := raw
		var ep excludePattern
		if strings.HasSuffix(p, "/") {
			ep.dirOnly = true
			p = strings.TrimRight(p, "/")
		}
		if strings.Contains(p, "/") {
			ep.whole = true
			p = strings.TrimLeft(p, "/")
		}
		if p == "" {
			return nil, fmt.Errorf("sharder: empty exclude pattern %q", raw)
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("sharder: bad exclude pattern %q: %w", raw, err)
		}
		ep.pat = p
		x.pats = append(x.pats, ep)
	}
	return x, nil
}

// match reports whether rel (relative to the source root, slash-separated, not
// ".") is excluded. isDir says whether rel names a directory.
func (x *excluder) match(rel string, isDir bool) bool {
	if x == nil || len(x.pats) == 0 {
		return false
	}
	base := rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		base = rel[i+1:]
	}
	for _, p := range x.pats {
		if p.dirOnly && !isDir {
			continue
		}
		name := base
		if p.whole {
			name = rel
		}
		// Patterns were validated in newExcluder, so Match cannot fail here.
		if ok, _ := path.Match(p.pat, name); ok {
			return true
		}
	}
	return false
}
