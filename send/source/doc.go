// Package source turns a batch's files into the bytes of its tar stream:
// it is the reading of the source tree on the sending side.
//
// What it provides:
//
//   - Source, a source root and how to read it (pacing, I/O concurrency,
//     -X, -A, --sparse). Open and OpenIn open an entry relative to its
//     cached directory (Dirs, SharedDirs) without following a symlink;
//     Recheck says whether the file changed while read (ErrChanged).
//   - WriteTar and WriteTarSums, a batch's needed files as a tar stream:
//     USTAR headers built directly for the common small file (tarfast.go),
//     PAX records for extended attributes, sparse maps and ranges of a
//     split file, small files read ahead by a pool of readers on a slow
//     filesystem (readahead.go), and bodies handed to a FileSender
//     (sendfile(2)) where nothing needs to see the bytes. A file that
//     changed is padded and withdrawn (wire.Discard), never installed.
//   - Extras and EntryXattrs, what travels besides the data: extended
//     attributes, ACLs and sparse maps; DataReader reads a sparse file's
//     extents.
//   - Sums, the content hashes of checksum mode, and Sample, the slice of
//     a batch the compression choice tries (package send).
//
// Where it sits: below package send, whose Client calls it for each
// batch; transport/local reads through it too. It imports the data model,
// the wire, metrics (the stream's counters) and the internal helpers, and
// must not import package send or the receiving side (internal/archtest).
package source
