// Package send is the sending side of a move: it takes the batches the walk
// (package sharder) cuts and carries them to a receiver over K streams.
//
// What it provides:
//
//   - Pool, the K streams of one job. Every stream pulls batches of regular
//     files from one shared queue, so the K streams finish together; the
//     pool splits the last batches as the queue drains, hands the batches
//     of a failed stream to the others and redials it with backoff
//     (Retryable says which failures a new stream may cure), and grows or
//     shrinks while it runs (Grow, Retire: -j auto, driven by package
//     send/autoj).
//   - Conn, one stream as the pool drives it, and Client, the Conn that
//     speaks the protocol (package wire) to a receiving hub over any
//     reader and writer: manifests ahead (wire.Window batches in flight),
//     the receiver's need list, the data as a tar stream, the commit.
//     How a Conn reaches its receiver (SSH, TLS, a local process or this
//     one) is a transport's business (package transport).
//   - The reading of the source tree is package send/source: a Client
//     hands it the batch and a writer, and it writes the batch's tar
//     stream (Source.WriteTar). Over plain TCP the Client's writer takes
//     bodies with sendfile(2) (source.FileSender).
//   - The choice of codec per batch (off, zstd, or auto, which samples
//     each batch and weighs the link against the CPU) is package
//     send/compress: a Client keeps one compress.Stream.
//   - Deferred, the directories, symlinks and hard links set aside for
//     the end of the job, and the sending half of --delete (RunPrune) and
//     of verify (Verifier).
//
// A job runs in three phases. First every stream pulls batches of regular
// files from the shared queue. Then each stream creates the hard links
// whose targets it wrote (a receiver only links to files it wrote). Last,
// stream 0 creates the symlinks and applies directory metadata, deepest
// directory first, once no stream writes anything any more.
//
// Where it sits: send imports the data model, the wire, the walk and the
// helpers below them, and reports its counters into package metrics. It
// must not import the receiving side (package receive and below it): the
// two ends meet only through the wire, and the tests in
// internal/archtest keep it so. Its own tests run the pool against the
// real hub (package receive) and the in-process transport.
package send
