package source

import "golang.org/x/sys/unix"

// oNoatime reads without updating the access time (the file's owner or
// CAP_FOWNER only: OpenIn retries without it on EPERM).
const oNoatime = unix.O_NOATIME
