package dirat

import "golang.org/x/sys/unix"

// sysFstatat: see sys_linux_amd64.go.
const sysFstatat = unix.SYS_FSTATAT
