package dirat

import "golang.org/x/sys/unix"

// sysFstatat is the number of fstatat with struct stat as unix.Stat_t
// has it (-1: none, Lstat goes through unix).
const sysFstatat = unix.SYS_NEWFSTATAT
