//go:build darwin || freebsd

package xattrs

import "golang.org/x/sys/unix"

// ErrNoAttr is the error of an attribute that is not there (ENODATA on
// Linux, ENOATTR on the BSDs).
const ErrNoAttr = unix.ENOATTR
