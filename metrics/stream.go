package metrics

import "sync/atomic"

// Stream is one stream's running totals. The sender updates them with
// atomics on its hot path (the sending side names them Counters);
// Job's collector and the bottleneck verdict read them. Times are in
// nanoseconds.
type Stream struct {
	BytesSent atomic.Int64 // file data sent (or copied, locally)
	FilesSent atomic.Int64
	// DeltaSaved is what the files sent as a block delta did not send of
	// their size: the blocks DEST had.
	DeltaSaved atomic.Int64
	Batches    atomic.Int64 // batches acknowledged
	Retries    atomic.Int64 // batches sent again after a failure

	ReadNanos atomic.Int64 // reading the source files
	SendNanos atomic.Int64 // blocked writing to the connection (socket full)
	WaitNanos atomic.Int64 // window full: waiting for the receiver's answers
	IdleNanos atomic.Int64 // nothing to send: waiting for the walk

	WireBytes atomic.Int64 // everything written to the connection: frames, tar, compressed data
	WireRead  atomic.Int64 // everything read from it: the receiver's frames (acks, sums)
	// SendfileBytes is the file data of WireBytes that went from the page
	// cache to the socket by sendfile.
	SendfileBytes atomic.Int64
	// Compression (--compress): the tar bytes of the batches sent
	// compressed, and the bytes their compressed data took on the wire
	// (its chunks; not the batches' other frames).
	CompressIn  atomic.Int64
	CompressOut atomic.Int64
	Compressing atomic.Bool // the stream's last batch went compressed

	// As the receiver reports them in its acknowledgements.
	RecvBytes      atomic.Int64
	RecvFiles      atomic.Int64
	RecvWriteNanos atomic.Int64
	RecvFsyncNanos atomic.Int64
	RecvCPUNanos   atomic.Int64 // the receiving process's CPU time (a gauge)
	// RecvLatency is the receiver's filesystem latency per operation, as
	// it measures it (a gauge, nanoseconds).
	RecvLatency atomic.Int64
	// RecvProcess names the receiving process; streams with the same
	// name share it (and its CPU time).
	RecvProcess atomic.Pointer[string]

	Active atomic.Bool // the stream is connected and working
}
