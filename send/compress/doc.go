// Package compress is the sending side's choice of how each batch's data
// travels: plain, or compressed with zstd (--compress none, zstd,
// zstd:LEVEL or auto).
//
// What it provides: Config and Parse, the --compress choice; Stream, one
// stream's encoders and, under auto, its policy, which chooses the codec
// of each batch (Stream.Codec, from a sample of the batch read through
// package send/source) and learns from how the last batches went
// (Stream.Observe: the stream's time blocked on the link, the receiver's
// load, this host's CPUs), and holds its decisions; AutoShare, the job's
// decision, which streams that have not decided take over; FarRTT, the
// round trip from which a path is far. How auto decides is told at the
// top of compress.go.
//
// Where it sits: below package send, whose Client holds one Stream per
// connection and writes the compressed tar in wire.ChunkWriter chunks. It
// imports the wire, the data model, send/source and internal helpers,
// and must not import package send or the receiving side
// (internal/archtest).
package compress
