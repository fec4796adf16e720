// Package extract is the receiving side of bulkmove: it installs batches of
// entries under a destination root, safely, whoever the sender is.
//
// A Receiver (Open) works beneath one root. For each batch the sender
// asks what it needs (Need, NeedSums), a Txn (Begin) takes the batch's
// files from a tar stream (ExtractTar, or Receive for a whole batch) or
// from the caller (Write), the entries of a final batch (directories,
// symlinks, hard links: Apply, ApplyFinal), and Commit installs them and
// returns the batch's ack; Prune deletes what the source lacks, and
// Verify compares without writing. The receiving hub, the agent and the
// serve daemon run it; so does a local copy.
//
// It imports the data model, the wire and internal helpers only: never
// the sending side, a transport or metrics (they call it, or read what it
// reports: Totals, the acks).
//
// # Safety
//
// The rules below hold whoever the sender is, and while a local user
// changes the destination under a running job:
//
//   - Names are local, clean and bounded (CheckName; symlink targets:
//     CheckLinkTarget), checked wherever an entry is written, looked up,
//     verified or pruned.
//   - Every create, link, rename and unlink is made in the descriptor of
//     its directory, opened beneath the root with no symlink followed on
//     the way or at its end (openDir), so no name, symlink or hard link
//     can reach outside it, and no directory of the destination swapped
//     for a symlink while a job runs is written through: it is refused
//     with an error that says so. Symlink targets are kept verbatim: they
//     are never followed on the way to anything written.
//   - A final name never holds a partial file: regular files are written
//     unnamed (O_TMPFILE), under a temporary name or staged aside, and
//     take their name when the batch commits, only if their data hash to
//     what the sender read. The one exception, a new file written under
//     its own name, is made only in a directory this receiver made (empty
//     then), and is removed if it fails.
//   - Symlinks and hard links arrive only in final batches, after all file
//     data (the sender orders them so); hard links may only point at
//     regular files this receiver wrote or verified in this session, and
//     what was linked is checked to be what was looked at.
//   - Device nodes and FIFOs cannot even be expressed on the wire; setuid
//     and setgid bits are dropped unless asked for; owners are given away
//     only with CAP_CHOWN; extended attributes and ACLs only in the
//     namespaces asked for and allowed (Policy). Metadata (mode, owner,
//     times, attributes) are applied through the open file descriptor,
//     never by a second path lookup that a symlink could redirect.
//   - Removal (--delete, an entry whose type changed) is by name in an
//     open directory descriptor and never follows a symlink; a non-empty
//     directory in the way of a file goes only with --delete. With
//     --backup, what goes is moved aside into a backup directory opened
//     the same way, beneath the root or the host's root (backup.go).
//
// # Files
//
// The receiver and a batch:
//
//	receiver.go  Receiver and Options: Open, Close, Dir, Identity, Totals, FreeSpace
//	opendest.go  OpenAt, OpenBeneath: a destination opened beneath a parent, no symlink followed
//	policy.go    Policy and Grant: what the receiving side lets a sender ask for
//	txn.go       Txn: Begin, Skip, Commit (hash check, placing), Abort; failures and their codes
//	tar.go       ExtractTar, ApplyFinal, Receive: a batch's tar stream; concurrent writers of small files
//	tarread.go   the tar reader: a fast path for the sender's own headers, archive/tar for the rest
//
// Path safety:
//
//	names.go     CheckName, CheckLinkTarget; openDir, the one way to a directory beneath the root
//	inway.go     what is in the way of an entry whose type changed: replaced, removed only with --delete
//	known.go     the hard-link targets this session wrote or verified, the only ones a link may have
//
// What to send, and checking what landed:
//
//	need.go      Need, NeedSums, NeedItems: the check modes (quick, size, existing, checksum, none), the hash pool
//	itemize.go   what was found changed of each entry, for the sender's -i (BatchAck.Items)
//	verify.go    Verify: entries compared with the destination, nothing written
//
// Writing files:
//
//	dirs.go      target directories, opened and made once a batch; which ones this receiver made
//	temp.go      temporary names, linking unnamed files into place, sweeping leftovers of killed runs
//	write.go     Write, WriteThen: create, copy, hash, metadata, then pending for Commit
//	ringwrite.go small files created and written a group at a time through io_uring
//	stage.go     staging directories, on slow filesystems without O_TMPFILE
//	partial.go   ranges of split files: the partial and its trailer of landed ranges
//	sparse.go    sparse files and preallocation
//	splice.go    file bodies spliced from a TCP socket when the sender sends no hashes
//	xattr.go     extended attributes and ACLs; FileData, a file's data with what travels beside it
//
// Metadata and final batches:
//
//	meta.go      owner, mode and mtime through descriptors; an up-to-date file's metadata repaired in place
//	apply.go     Apply: directories, symlinks and hard links of final batches
//
// Deleting:
//
//	prune.go     Prune, PruneDir, PruneNames: --delete in bounded memory, no symlink followed
//	backup.go    --backup, --backup-dir, --suffix: what is replaced or deleted moved aside, no symlink followed
package extract
