package linger

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRecord: a record saved is read back, readable by this user alone,
// under the state directory, one per account and binary; a missing or
// unusable record reads as none.
func TestRecord(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	p, err := Path("root@box2:22", "sha256:abc")
	if err != nil {
		t.Fatal(err)
	}
	if other, _ := Path("root@box3:22", "sha256:abc"); other == p {
		t.Fatalf("two accounts share the record %s", p)
	}
	if rel, err := filepath.Rel(state, p); err != nil || !filepath.IsLocal(rel) {
		t.Fatalf("record %s, want it under %s", p, state)
	}
	if r := Load(p); r != nil {
		t.Fatalf("Load of no record: %+v", r)
	}
	want := Record{Sock: "/run/user/0/bulkmove/agent-x.sock", Token: "0123456789abcdef0123456789abcdef"}
	if err := Save(p, want); err != nil {
		t.Fatal(err)
	}
	if r := Load(p); r == nil || *r != want {
		t.Fatalf("Load: %+v, want %+v", r, want)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record %s: %v, %v; want 0600", p, fi.Mode(), err)
	}
	os.WriteFile(p, []byte(`{"sock":"/x"}`), 0o600)
	if r := Load(p); r != nil {
		t.Fatalf("Load of a record without a token: %+v", r)
	}
}

// TestLock: pushes to one account take turns with its record.
func TestLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "linger", "r.json")
	unlock, err := Lock(p)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{})
	go func() {
		u, err := Lock(p)
		if err != nil {
			t.Error(err)
		}
		close(got)
		u()
	}()
	select {
	case <-got:
		t.Fatal("a second lock was taken while the first was held")
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	unlock() // a no-op once called
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the second lock was not taken once the first was let go")
	}
}
