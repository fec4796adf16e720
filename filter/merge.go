package filter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// dirMerge is a dir-merge rule (":"): in each directory a walk enters, the
// rules of the file name there take its place, followed by those inherited
// from the directories above.
type dirMerge struct {
	given string // the file as the rule gives it ("/.rsync-filter")
	name  string // its base name, looked for in each directory
	t     tmpl
	idx   int // among the Rules' dir-merge rules
}

// MaxRulesFile is the largest per-directory or merge file read.
const MaxRulesFile = 16 << 20

// Tree is a directory tree a walk applies rules to.
type Tree struct {
	// Root is the tree's root on disk: per-directory files are found
	// under it, and rules with the '/' modifier match the absolute path.
	Root string
	// Read, if set, reads the per-directory file name in dir (relative
	// to Root, slash-separated, "." for Root); a file that is not there
	// is an error matching fs.ErrNotExist. nil: read it under Root.
	Read func(dir, name string) ([]byte, error)
	// NoParents: a dir-merge rule whose file is given with a path above
	// Root ("/.rsync-filter", as -F gives it) does not read the file in
	// each directory from there down to Root's parent, as rsync's sender
	// does; only the files under Root count.
	NoParents bool
	// Secret: an error about a line of a per-directory file does not
	// quote it (a receiver reads the files a sender names, and must not
	// hand the sender a line of a file it could not otherwise read).
	Secret bool
}

// Dir is the rules in force for the names of one directory of a tree: the
// Rules, with the rules of the per-directory files of the directory and
// those above it in the place of each dir-merge rule. A nil *Dir excludes
// and protects nothing. A Dir is immutable: walkers share it.
type Dir struct {
	t     *tree
	lists [][]rule // by dir-merge rule: the directory's own rules, then those inherited
}

type tree struct {
	r      *Rules
	secret bool
	root   string // Root, absolute
	abs    string // what goes before a path to make it absolute, without the leading '/'
	read   func(dir, name string) ([]byte, error)
}

// Top returns the rules in force above the root of t: the Dir whose Sub(".")
// gives those of the root's names. It reads the per-directory files of the
// directories above Root that a dir-merge rule asks for (see NoParents).
func (r *Rules) Top(t Tree) (*Dir, error) {
	if r == nil {
		return nil, nil
	}
	root, err := filepath.Abs(t.Root)
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real // as rsync's getcwd()
	}
	tr := &tree{r: r, root: root, read: t.Read, secret: t.Secret}
	if root != "/" {
		tr.abs = root[1:] + "/"
	}
	if tr.read == nil {
		tr.read = func(dir, name string) ([]byte, error) {
			return readFile(filepath.Join(root, filepath.FromSlash(dir), name))
		}
	}
	d := &Dir{t: tr, lists: make([][]rule, len(r.merges))}
	if t.NoParents {
		return d, nil
	}
	for i, m := range r.merges {
		if !strings.Contains(m.given, "/") {
			continue
		}
		given := m.given
		if !filepath.IsAbs(given) {
			given = filepath.Join(root, given)
		}
		from := filepath.Dir(filepath.Clean(given))
		if from == root || !strings.HasPrefix(root+"/", strings.TrimSuffix(from, "/")+"/") {
			continue // not above the tree: only its base name counts
		}
		// From there down to the root's parent, as rsync's
		// setup_merge_file().
		dirs := []string{from}
		rest := strings.Split(strings.TrimPrefix(root, strings.TrimSuffix(from, "/")+"/"), "/")
		for _, c := range rest[:len(rest)-1] {
			dirs = append(dirs, filepath.Join(dirs[len(dirs)-1], c))
		}
		var list []rule
		for _, dir := range dirs {
			p, err := tr.parse(m, dir, func() ([]byte, error) { return readFile(filepath.Join(dir, m.name)) })
			if err != nil {
				return nil, err
			}
			list = concat(p, list)
		}
		if !m.t.noInherit {
			d.lists[i] = list
		}
	}
	return d, nil
}

// concat returns local followed by inherited; nil local if it is nil (the
// file cleared what it inherited).
func concat(p *parsed, inherited []rule) []rule {
	switch {
	case p == nil:
		return inherited
	case p.cleared:
		return p.local
	case len(p.local) == 0:
		return inherited
	}
	return append(p.local[:len(p.local):len(p.local)], inherited...)
}

// parsed is a per-directory file's rules.
type parsed struct {
	local   []rule
	cleared bool // it cleared the rules it inherits ("!")
}

// parse reads the file of dir-merge rule m in dir (relative to the root,
// or absolute for a directory above it) with read; nil if there is none.
func (t *tree) parse(m *dirMerge, dir string, read func() ([]byte, error)) (*parsed, error) {
	data, err := read()
	full := dir
	if !filepath.IsAbs(dir) {
		full = filepath.Join(t.root, filepath.FromSlash(dir))
	}
	full = filepath.Join(full, m.name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
			return nil, nil
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("filter file %s: %w", full, err)
	}
	p := new(parsed)
	in := &fileCtx{name: full, perDir: true, merges: t.r.merges, secret: t.secret}
	in.anchor = func(pat string) (string, bool) {
		if filepath.IsAbs(dir) {
			// Above the tree: matched against absolute paths.
			if dir == "/" {
				return pat, true
			}
			return strings.TrimSuffix(escapeWild(filepath.ToSlash(dir), pat), "/") + pat, true
		}
		if dir == "." {
			return pat, false
		}
		return "/" + escapeWild(dir, pat) + pat, false
	}
	in.clear = func() { p.cleared = true }
	if err := t.r.readRules(&p.local, bytes.NewReader(data), m.t, in); err != nil {
		return nil, err
	}
	if len(p.local) == 0 && !p.cleared {
		return nil, nil
	}
	return p, nil
}

// escapeWild returns dir, to go before the anchored pattern pat: with its
// wildcard characters escaped where the whole is a wildcard pattern, so
// that they match themselves.
func escapeWild(dir, pat string) string {
	if !strings.ContainsAny(dir, `*?[`) && !strings.ContainsAny(pat, `*?[`) {
		return dir
	}
	var b strings.Builder
	for i := 0; i < len(dir); i++ {
		if strings.IndexByte(`*?[\`, dir[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(dir[i])
	}
	return b.String()
}

// readFile reads a per-directory file, up to MaxRulesFile bytes.
func readFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadLimited(f, name)
}

// ReadLimited reads what r holds, the file name, up to MaxRulesFile bytes.
func ReadLimited(r io.Reader, name string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxRulesFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxRulesFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, MaxRulesFile)
	}
	return b, nil
}

// Sub returns the rules in force for the names of dir (relative to the
// root, slash-separated; "." for the root itself), a directory whose
// parent's names d is in force for: d's, with the rules of dir's own
// per-directory files before those it inherits. It returns d itself where
// nothing changes (no dir-merge rule, or no file in dir and nothing to
// drop), so that a walk keeps one Dir for a subtree without files. An
// error names the file that cannot be read or parsed, and the line.
func (d *Dir) Sub(dir string) (*Dir, error) {
	if d == nil || len(d.t.r.merges) == 0 {
		return d, nil
	}
	t := d.t
	var nd *Dir
	for i, m := range t.r.merges {
		inh := d.lists[i]
		if m.t.noInherit {
			inh = nil
		}
		p, err := t.parse(m, dir, func() ([]byte, error) { return t.read(dir, m.name) })
		if err != nil {
			return nil, err
		}
		list := concat(p, inh)
		if nd == nil && !same(list, d.lists[i]) {
			nd = &Dir{t: t, lists: make([][]rule, len(d.lists))}
			copy(nd.lists, d.lists[:i])
		}
		if nd != nil {
			nd.lists[i] = list
		}
	}
	if nd == nil {
		return d, nil
	}
	return nd, nil
}

func same(a, b []rule) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// Excluded is Rules.Excluded with the per-directory rules of d in force:
// path is a name of the directory d is for.
func (d *Dir) Excluded(path string, isDir bool) bool {
	if d == nil || path == "" {
		return false
	}
	return d.t.r.excluded(path, isDir, d.lists, d.t.abs)
}

// Protected is Rules.Protected with the per-directory rules of d in force.
func (d *Dir) Protected(path string, isDir, deleteExcluded bool) bool {
	if d == nil || path == "" {
		return false
	}
	return d.t.r.protected(path, isDir, deleteExcluded, d.lists, d.t.abs)
}

// HasDirMerge reports whether r has dir-merge rules: a walk must then ask
// each directory's Dir.
func (r *Rules) HasDirMerge() bool { return r != nil && len(r.merges) > 0 }

func (r *Rules) excluded(path string, isDir bool, lists [][]rule, abs string) bool {
	base := path[strings.LastIndexByte(path, '/')+1:]
	for i := range r.send {
		ru := &r.send[i]
		if ru.merge != nil {
			if lists == nil {
				continue
			}
			l := lists[ru.merge.idx]
			for j := range l {
				if ru := &l[j]; (ru.sides == 0 || ru.sides&sender != 0) && ru.matches(path, base, isDir, abs) {
					return !ru.include
				}
			}
			continue
		}
		if ru.matches(path, base, isDir, abs) {
			return !ru.include
		}
	}
	return false
}

func (r *Rules) protected(path string, isDir, deleteExcluded bool, lists [][]rule, abs string) bool {
	base := path[strings.LastIndexByte(path, '/')+1:]
	for i := range r.all {
		ru := &r.all[i]
		if ru.merge != nil {
			if lists == nil {
				continue
			}
			l := lists[ru.merge.idx]
			for j := range l {
				if ru := &l[j]; ru.receives(deleteExcluded) && ru.matches(path, base, isDir, abs) {
					return !ru.include
				}
			}
			continue
		}
		if ru.receives(deleteExcluded) && ru.matches(path, base, isDir, abs) {
			return !ru.include
		}
	}
	return false
}

// receives reports whether ru applies on the receiving side.
func (ru *rule) receives(deleteExcluded bool) bool {
	return ru.sides&receiver != 0 || (ru.sides == 0 && !deleteExcluded)
}

// matches reports whether ru's pattern decides for path: a rule with the
// '/' modifier matches the absolute path (abs before path), as rsync's
// rule_matches() does.
func (ru *rule) matches(path, base string, isDir bool, abs string) bool {
	if ru.abs && abs != "" {
		switch ru.m.kind {
		case litPath, litTail, pathWild:
			path = abs + path
		}
	}
	return ru.m.match(path, base, isDir) != ru.negate
}
