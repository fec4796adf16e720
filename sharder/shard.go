package sharder

import (
	"fmt"
	"strconv"
	"strings"
)

// Shard selects the Index-th of Count disjoint parts of a tree, without a
// plan: N processes, each given its own Index of the same Count, together
// cover every entry exactly once.
//
// Ownership goes by directory: the shard of directory D (the one whose
// Index is FNV-1a 64 of D's path relative to the source, "." for the root,
// modulo Count) owns D's own entry (its metadata) and every name directly
// in D that is not a directory (regular files, symlinks, hard links). So a
// directory's files stay together, on one host, in one batch stream, and
// its subdirectories are spread by their own paths. A walk of one shard
// still reads every directory (to find the subdirectories), but lstats and
// emits only what the shard owns.
//
// The zero Shard (Count 0) and any Shard of Count 1 own everything.
type Shard struct {
	Index int // 0 <= Index < Count
	Count int
}

// ParseShard parses "i/N" with 0 <= i < N (an Indexed Job's
// JOB_COMPLETION_INDEX, or a 0-based job array's task id).
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("invalid shard %q (want i/N with 0 <= i < N, e.g. 0/4)", s)
	}
	return Shard{Index: i, Count: n}, nil
}

func (s Shard) String() string {
	if s.Count <= 1 {
		return "0/1"
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// All reports whether s owns every entry.
func (s Shard) All() bool { return s.Count <= 1 }

// OwnsDir reports whether s owns directory dir (slash-separated, relative
// to the source, "." for the root): its entry and the non-directory names
// directly in it.
func (s Shard) OwnsDir(dir string) bool {
	return s.Count <= 1 || ShardOf(dir, s.Count) == s.Index
}

// Owns reports whether s owns the entry at rel, of a directory or not.
func (s Shard) Owns(rel string, isDir bool) bool {
	if s.Count <= 1 {
		return true
	}
	if isDir {
		return s.OwnsDir(rel)
	}
	return s.OwnsDir(parentDir(rel))
}

// ShardOf returns the shard, among n, of directory dir: FNV-1a 64 of its
// path, modulo n. It is stable across hosts, runs and versions.
func ShardOf(dir string, n int) int {
	if n <= 1 {
		return 0
	}
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(dir); i++ {
		h ^= uint64(dir[i])
		h *= prime
	}
	return int(h % uint64(n))
}

// parentDir is path.Dir for the clean relative paths of entries: "." for a
// name at the top.
func parentDir(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}
