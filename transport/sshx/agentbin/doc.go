// Package agentbin finds, on the far side of an SSH connection, the
// bulkmove binary that a push or a pull runs there (`bulkmove --agent`,
// `bulkmove --send-hub`), and installs this very binary there when the
// remote has none it may run.
//
// Where a remote bulkmove comes from, in the order it is looked for:
//
//   - --remote-bulkmove PATH, as the user gave it: it must answer
//     `version --proto` with this protocol (Ensure's remotePath);
//   - `bulkmove` on the remote PATH, if its `bulkmove version` reports this
//     very release and protocol (a packaged install);
//   - the per-user cache, ~/.cache/bulkmove/VERSION/bulkmove (CacheDir),
//     holding a binary uploaded by an earlier run;
//   - else this binary is uploaded to that cache (over SFTP, or through
//     cat where the server has no SFTP), if the remote's `uname -sm` is
//     this build's GOOS/GOARCH.
//
// Two entry points: Command is the fast path, one remote command that
// runs the agent at once if the PATH's or the cache's binary will do and
// prints NoAgent otherwise; Ensure is the slow path a push falls back to
// then, which probes, repairs, uploads and records, a few round trips.
//
// # The cache's safety rules
//
// A binary in the cache runs with the user's rights on every later push,
// so the cache is trusted only as far as whoever can write to it, as
// sshd's StrictModes trusts a home directory:
//
//   - every directory from the home down to ~/.cache/bulkmove/VERSION is
//     owned by the remote user or by root, and writable by neither group
//     nor others; the home is followed through symbolic links (its parents
//     are the system's), every directory below it must be no symbolic link;
//   - the binary is a regular file owned by the user and writable by no one
//     else;
//   - it is the file that was hashed: when Ensure finds or installs the
//     right binary (SHA-256 equal to this one's) it writes its record,
//     VERSION/bulkmove.record (RecordSuffix), "SHA256|STAT" where STAT is
//     the file's stat(2) fields (owner, mode, type, device, inode, size,
//     mtime, ctime). Command runs the cached binary only if the directories
//     still pass, the record names this binary's SHA-256 and the file's
//     stat fields are still the recorded ones: a file swapped or rewritten
//     in place since is not run.
//
// A symbolic link, a directory owned by another user, or a home or
// ~/.cache writable by group or others is refused with ErrUnsafeCache,
// naming it: those are the user's to fix. The directories bulkmove makes
// itself (~/.cache/bulkmove and below, created 0700) are made 0700 again
// if group or others can write to them, with a warning, and the binary in
// them is hashed afresh before it is trusted. An upload goes to a
// temporary name, is hashed there, made 0755, run once (`version
// --proto`), renamed, and only then recorded.
//
// Every check runs on the remote in one shell script (POSIX sh, GNU or
// BSD stat(1), sha256sum or shasum): nothing is checked by a separate
// round trip that the file could change between.
//
// # Where it sits
//
// It runs its commands over a Remote, which transport/sshx's Client
// provides: transport/ssh and the engine's pull call Ensure through
// sshx.Client.EnsureAgent, and transport/ssh builds its fast path with
// Command, Sum and NoAgent. It imports no transport (sshx imports it,
// not the reverse), no end of the transfer and no metrics: only
// internal/shell and internal/units of bulkmove.
package agentbin
