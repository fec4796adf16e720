package agentbin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The binary's hash is taken from the record while the binary is the same
// file, unchanged, and hashed again (and recorded anew) once it is not: a
// stale hash would have Command run a cached upload of another build.
func TestCachedSum(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bulkmove")
	rec := filepath.Join(dir, "cache", "bulkmove", ".self.sha256")
	if err := os.WriteFile(bin, []byte("one build"), 0o755); err != nil {
		t.Fatal(err)
	}
	want, _ := Sum(bin)
	if got, err := cachedSum(bin, rec); err != nil || got != want {
		t.Fatalf("first cachedSum = %q, %v; want %q", got, err, want)
	}
	fi, err := os.Stat(rec)
	if err != nil {
		t.Fatalf("no record written: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("record mode %v, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(rec)); di.Mode().Perm() != 0o700 {
		t.Errorf("record's directory mode %v, want 0700", di.Mode().Perm())
	}

	// The record is what answers: a sum put in it for the same key comes back.
	b, _ := os.ReadFile(rec)
	forged := strings.Repeat("ab", 32)
	os.WriteFile(rec, []byte(strings.Replace(string(b), want, forged, 1)), 0o600)
	if got, _ := cachedSum(bin, rec); got != forged {
		t.Fatalf("cachedSum with a record for the same file = %q, want the record's %q", got, forged)
	}

	// Written to in place, its mtime put back: hashed again.
	mt := time.Now().Add(-time.Hour)
	os.Chtimes(bin, mt, mt)
	cur, _ := cachedSum(bin, rec) // records the present key
	if cur != want {
		t.Fatalf("after a new mtime cachedSum = %q, want %q", cur, want)
	}
	os.WriteFile(bin, []byte("the second build"), 0o755)
	os.Chtimes(bin, mt, mt)
	want2, _ := Sum(bin)
	if got, _ := cachedSum(bin, rec); got != want2 {
		t.Errorf("after the file changed in place (mtime kept) cachedSum = %q, want %q", got, want2)
	}

	// Replaced by another file: hashed again.
	other := filepath.Join(dir, "new")
	os.WriteFile(other, []byte("three build"), 0o755)
	os.Rename(other, bin)
	want3, _ := Sum(bin)
	if got, _ := cachedSum(bin, rec); got != want3 {
		t.Errorf("after the file was replaced cachedSum = %q, want %q", got, want3)
	}

	// A record that is not one is ignored and rewritten; no record at all works.
	for _, bad := range []string{"", "garbage", "path=x sha256=zz"} {
		os.WriteFile(rec, []byte(bad), 0o600)
		if got, _ := cachedSum(bin, rec); got != want3 {
			t.Errorf("with the record %q cachedSum = %q, want %q", bad, got, want3)
		}
	}
	// A record others may write, or a link to one, is not believed.
	k, _ := fileKey(bin)
	forgedRec := k + " sha256=" + forged + "\n"
	os.WriteFile(rec, []byte(forgedRec), 0o600)
	os.Chmod(rec, 0o666)
	if got, _ := cachedSum(bin, rec); got != want3 {
		t.Errorf("with a record writable by others cachedSum = %q, want the hash %q", got, want3)
	}
	elsewhere := filepath.Join(dir, "elsewhere")
	os.WriteFile(elsewhere, []byte(forgedRec), 0o600)
	os.Remove(rec)
	os.Symlink(elsewhere, rec)
	if got, _ := cachedSum(bin, rec); got != want3 {
		t.Errorf("with a record that is a symbolic link cachedSum = %q, want the hash %q", got, want3)
	}
	if got, _ := cachedSum(bin, ""); got != want3 {
		t.Errorf("with no record cachedSum = %q, want %q", got, want3)
	}
	if _, err := cachedSum(filepath.Join(dir, "missing"), rec); err == nil {
		t.Error("cachedSum of a missing file: no error")
	}
}
