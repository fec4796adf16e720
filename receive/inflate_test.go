package receive_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"go.uber.org/goleak"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/wire"
)

// TestCompressHostile: the agent refuses compressed data that expands past
// what its batch can take (a decompression bomb), and data after the tar;
// truncated compressed data is a retryable error, corrupt data is caught;
// nothing lands.
func TestCompressHostile(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileEntry("a", 3)}}
	good := tarStream(t, 1, []tarFile{{"a", []byte("abc")}})
	// The bomb: 64 global headers of 1 MiB each (which the tar reader
	// takes one by one), then the file.
	var bomb bytes.Buffer
	tw := tar.NewWriter(&bomb)
	for range 64 {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header",
			PAXRecords: map[string]string{wire.PAXBatch: "1", "comment": strings.Repeat("A", 1<<20-64)}})
	}
	bomb.Write(good[1024:])
	corrupt := zstdChunks(t, good)
	corrupt[len(corrupt)/2] ^= 0x55

	for _, tc := range []struct {
		name      string
		data      []byte
		cut       bool
		want      string
		retryable bool
	}{
		{name: "bomb", data: zstdChunks(t, bomb.Bytes()), want: "expands past"},
		{name: "data after the tar", data: zstdChunks(t, append(slicesClone(good), make([]byte, 64<<20)...)), want: "after the end of the tar"},
		{name: "truncated", data: zstdChunks(t, good)[:20], cut: true, retryable: true},
		{name: "corrupt", data: corrupt, want: "compressed data corrupt", retryable: true},
		{name: "chunk too long", data: []byte{0x10, 0, 0, 0}, want: "over the"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "dst")
			a := startServe(t, root)
			a.handshake()
			a.manifest(m)
			a.send(wire.Data, wire.EncodeData(1, wire.CodecZstd))
			a.sendRaw(tc.data)
			var err error
			if tc.cut {
				a.cut()
				err = a.wait()
			} else {
				a.send(wire.Commit, wire.EncodeCommit(1, nil))
				err = a.failed()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if tc.cut && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("error %v, want io.ErrUnexpectedEOF", err)
			}
			// What the sender sees: the agent's word, or a cut connection.
			seen := error(&send.RemoteError{Msg: err.Error()})
			if tc.cut {
				seen = err
			}
			if got := send.Retryable(seen); got != tc.retryable {
				t.Errorf("Retryable(%v) = %v, want %v", seen, got, tc.retryable)
			}
			checkClean(t, root, "a")
		})
	}
	if n := len(zstdChunks(t, bomb.Bytes())); n > 64<<10 {
		t.Errorf("the bomb takes %d bytes compressed: not much of a bomb", n)
	}
}

// TestCompressWireRoundTrip: a batch compressed by hand lands, and the
// session goes on with a plain batch after it (the decoder read nothing
// beyond its chunks).
func TestCompressWireRoundTrip(t *testing.T) {
	defer goleak.VerifyNone(t)
	root := filepath.Join(t.TempDir(), "dst")
	a := startServe(t, root)
	a.handshake()
	for id := uint64(1); id <= 3; id++ {
		name := "f" + strconv.FormatUint(id, 10)
		m := &wire.BatchManifest{ID: id, Entries: []model.Entry{fileEntry(name, 5)}}
		a.manifest(m)
		data := tarStream(t, id, []tarFile{{name, []byte("hello")}})
		if id == 2 {
			a.send(wire.Data, wire.EncodeData(id, wire.CodecNone))
			a.sendRaw(data)
		} else {
			a.send(wire.Data, wire.EncodeData(id, wire.CodecZstd))
			a.sendRaw(zstdChunks(t, data))
		}
		a.send(wire.Commit, wire.EncodeCommit(id, nil))
		if ack, err := wire.DecodeAck(a.expect(wire.Ack).p); err != nil || ack.ID != id || ack.Files != 1 {
			t.Fatalf("ack %+v %v", ack, err)
		}
	}
	a.send(wire.End, nil)
	a.expect(wire.Summary)
	if err := a.wait(); err != nil {
		t.Fatal(err)
	}
}

// zstdChunks compresses b and frames it as a compressed batch's data.
func zstdChunks(t *testing.T, b []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var out bytes.Buffer
	cw := wire.ChunkWriter{W: &out}
	cw.Write(enc.EncodeAll(b, nil))
	cw.End()
	return out.Bytes()
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }
