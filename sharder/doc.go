// Package sharder walks a source tree in parallel and cuts what it finds into
// balanced batches while the walk is still running.
//
// A batch holds regular files only; directories, symlinks and the second and
// later names of hard-linked files are handed to the caller separately
// (Options.Deferred), because the receiver must create them after all file
// data has landed (symlinks, hard links) or apply their metadata last
// (directories). Batches are balanced by a cost of bytes plus a per-file
// overhead, so that K streams pulling from one queue finish together.
//
// # The walk
//
// Run reads many directories at once (Options.Concurrency workers taking
// directories from a shared stack), each in chunks of 1024 names read with
// getdents64 into memory reused from directory to directory (dirReader; on
// other systems (*os.File).ReadDir), and lstats every name relative to the
// open directory (fstatat): a file walked costs one allocation, its path.
// Symlinks are never followed. Each chunk goes as one unit, over a
// bounded channel, to a single collector goroutine that calls the callbacks
// and feeds the partitioner, so the files of one directory stay together in a
// batch: creates in one directory serialise on the receiver, and keeping them
// together lets K streams write into K different directories (except where
// Options.Spread says the destination is slow: then a batch takes the files
// of 16 directories in turn, see spread.go). Batches leave
// while the walk is still running, and the send on the output channel blocks,
// so memory is bounded by the batches in flight, a few chunks per worker and
// the stack of directories not yet read, however large the tree.
//
// Hard links are detected across the whole job by device and inode (only for
// files with more than one link): the first name the walk meets is a file in
// a batch, the others are KindHardlink entries pointing at it. An inode is
// remembered only until all its names have been met, so the walk's memory
// for hard links is the link sets open at once (one name met, another not
// yet), not every hard-linked file of the tree.
//
// # Exclusion
//
// Options.Filter holds rsync's include/exclude rules (package filter): each
// name is checked by its path relative to the source, the first matching
// rule decides, and an excluded name of any kind is skipped. An excluded
// directory is not read at all, as rsync does not descend into one, so
// nothing under it is moved whatever the rules say about it. A single-file
// source is checked by its base name.
package sharder
