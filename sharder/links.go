package sharder

import "strings"

// Links says what the walk makes of the symlinks under SRC, as rsync's
// options do. The zero value copies them as symlinks.
type Links struct {
	// Copy (-L, --copy-links): every symlink is replaced by what it
	// points to, a file or a directory walked in turn; one that points
	// nowhere is an error ("symlink has no referent") and left out.
	Copy bool
	// CopyUnsafe (--copy-unsafe-links): as Copy, for the unsafe symlinks
	// alone (Unsafe); the others stay symlinks.
	CopyUnsafe bool
	// Safe (--safe-links): unsafe symlinks are left out, quietly (still
	// in SRC, so --delete keeps their names at DEST). CopyUnsafe and Copy
	// come first.
	Safe bool
}

// Follows says whether the symlink at rel (slash-separated, under SRC),
// pointing to target, is replaced by what it points to.
func (l Links) Follows(rel, target string) bool {
	return l.Copy || l.CopyUnsafe && Unsafe(rel, target)
}

// Skips says whether the symlink at rel, pointing to target, is left out.
func (l Links) Skips(rel, target string) bool {
	return l.Safe && !l.Copy && !l.CopyUnsafe && Unsafe(rel, target)
}

// Any says whether a symlink may be followed at all.
func (l Links) Any() bool { return l.Copy || l.CopyUnsafe }

// Unsafe is rsync's lexical test of a symlink at rel pointing to target:
// unsafe if target is empty or absolute, if its leading ".." components
// climb above SRC from rel's directory, or if a ".." comes after a name
// ("d/../x", "d/.."). "." components count for nothing.
func Unsafe(rel, target string) bool {
	if target == "" || target[0] == '/' {
		return true
	}
	depth := strings.Count(rel, "/") // of rel's directory beneath SRC
	named := false
	for c := range strings.SplitSeq(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if named {
				return true
			}
			if depth--; depth < 0 {
				return true
			}
		default:
			named = true
		}
	}
	return false
}

// NoReferentError is a symlink followed (-L) that points to nothing, or
// to a chain of symlinks too long: rsync's "symlink has no referent".
type NoReferentError struct {
	Path string // the symlink's path on disk
	Err  error  // what stat said
}

func (e *NoReferentError) Error() string { return `symlink has no referent: "` + e.Path + `"` }

func (e *NoReferentError) Unwrap() error { return e.Err }

func noReferent(path string, err error) error { return &NoReferentError{Path: path, Err: err} }
