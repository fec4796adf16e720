package wire

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
)

// What the two ends of a stream agree on besides the frames themselves.

// Window is how many batches a stream keeps in flight: manifests are sent
// ahead so the receiver's quick check never costs the stream a round trip,
// and acknowledgements of earlier batches arrive while later ones are sent.
// On an incremental pass most batches carry a few files each, and every
// one waits for its need list and its commit, so a smaller window leaves a
// stream idle between them over a link of any latency. A receiver holds
// the manifests of twice as many batches before their data.
const Window = 8

// MaxZstdWindow bounds the window of compressed data (a Data frame's
// zstd codec): a sender's encoder uses no more, and a receiver refuses
// frames that ask for more, so a session's decoder holds at most that much
// history.
const MaxZstdWindow = 8 << 20

// SparseMin is the smallest file a sender sends as data extents (the
// PAXSparse map): below it, one lseek more a file is not worth what a hole
// could save. A receiver's bound on a batch's decompressed size counts a
// map only for files this large.
const SparseMin = 128 << 10

// ErrVersion marks peers of different protocol versions; the error that
// wraps it names both.
var ErrVersion = errors.New("protocol version mismatch")

// ErrCorrupt marks compressed data that does not decode: damaged on the
// way (or a broken sender). The stream is lost; the receiver's Fail frame
// names it, and the sender takes it for a failure a new stream may cure.
var ErrCorrupt = errors.New("compressed data corrupt")

// ProcessID names this process in handshakes (Handshake.Process): a
// sender that finds its own ID in the receiver's Hello knows the receiver
// runs in this very process, sharing its CPU.
var ProcessID = func() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()
