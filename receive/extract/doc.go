// Package extract is the receiving side of bulkmove: it installs batches of
// entries under a destination root, safely, whoever the sender is.
//
// Every file operation is made in the descriptor of its directory, opened
// beneath the destination with no symlink followed on the way (openDir),
// so no name, symlink or hard link can reach outside it, and no directory
// of the destination swapped for a symlink while a job runs is written
// through. Names must be local (filepath.IsLocal). Regular files are
// written under a temporary name in their target directory and renamed
// into place when the batch commits, so a final name never holds a
// partial file. Symlinks and hard links arrive only in final batches, after
// all file data (the sender orders them so); hard links may only point at
// regular files this receiver wrote or verified in this session. Device
// nodes and FIFOs cannot even be expressed on the wire; setuid and setgid
// bits are dropped unless asked for. Metadata (mode, owner, times) is
// applied through the open file descriptor, never by a second path lookup
// that a symlink could redirect.
package extract
