package extract_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/receive/extract"
)

// TestIdentity: two receivers of one directory name it alike; the same
// name deleted and made anew is another directory (where the filesystem
// keeps a birth time or an inode generation to tell them apart).
func TestIdentity(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "dst")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	id := func() string {
		t.Helper()
		r, err := extract.Open(dst, extract.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		return r.Identity()
	}
	first := id()
	if !strings.HasPrefix(first, "dev=") || !strings.Contains(first, " ino=") {
		t.Fatalf("Identity() = %q, want dev=... ino=...", first)
	}
	if again := id(); again != first {
		t.Errorf("the same directory: %q, then %q", first, again)
	}
	if err := os.Remove(dst); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first, " born=") && !strings.Contains(first, " gen=") {
		t.Skipf("the filesystem keeps neither birth times nor generations (%q): a reused inode number looks the same", first)
	}
	if anew := id(); anew == first {
		t.Errorf("deleted and made anew, the directory has the same identity %q", anew)
	}
}
