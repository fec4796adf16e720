//go:build linux && !amd64 && !arm64

package dirat

// sysFstatat: see sys_linux_amd64.go. Elsewhere struct stat and its call
// differ by architecture (fstatat64 on 32 bits): unix knows them.
const sysFstatat = -1
