package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// The edit changes exactly the planned share of bytes, every one of them, in
// runs apart from each other, and the same seed gives the same file.
func TestEditChangesTheShareInSeparateRuns(t *testing.T) {
	dir := t.TempDir()
	orig := make([]byte, 1<<20)
	for i := range orig {
		orig[i] = byte(i * 7)
	}
	var outs [2][]byte
	for k := range outs {
		name := filepath.Join(dir, "f")
		if err := os.WriteFile(name, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		rs, err := edit(name, 0.01, 16, rand.New(rand.NewPCG(3, 0)))
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 16 {
			t.Fatalf("%d runs, want 16", len(rs))
		}
		for i := 1; i < len(rs); i++ {
			if rs[i].off <= rs[i-1].off+rs[i-1].n {
				t.Fatalf("runs %v and %v overlap or touch", rs[i-1], rs[i])
			}
		}
		outs[k], _ = os.ReadFile(name)
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatal("the same seed gave two different files")
	}
	changed := 0
	for i := range orig {
		if orig[i] != outs[0][i] {
			changed++
		}
	}
	if want := int(float64(len(orig)) * 0.01); changed != want {
		t.Fatalf("%d bytes changed, want %d", changed, want)
	}
}

func TestGrowAppends(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := appendRandom(name, 3<<20+5, rand.New(rand.NewPCG(1, 0))); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(name)
	if len(b) != 3+3<<20+5 || string(b[:3]) != "old" {
		t.Fatalf("size %d, prefix %q", len(b), b[:3])
	}
}
