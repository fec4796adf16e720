package extract

import "errors"

// ErrNeedsLinux is Supported's error where this package cannot receive:
// it writes with Linux's calls (openat2, O_TMPFILE, statx, ...), and the
// sending side alone builds for the other systems.
var ErrNeedsLinux = errors.New("receiving needs Linux: bulkmove receives on Linux only; run the receiver there")
