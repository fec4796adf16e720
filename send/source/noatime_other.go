//go:build unix && !linux

package source

// oNoatime: there is no O_NOATIME here; reads update the access time as
// the filesystem's mount options say.
const oNoatime = 0
