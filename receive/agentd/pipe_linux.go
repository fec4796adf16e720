package agentd

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeSize is what growPipes asks for: /proc/sys/fs/pipe-max-size's
// default, which an unprivileged user may ask for.
const pipeSize = 1 << 20

// growPipes gives each of the agent's stdin and stdout that is a pipe
// (sshd's, for the first stream) a 1 MiB buffer in place of 64 KiB. sshd
// writes into the pipe only what fits and holds the rest of what the
// sender sent in its own buffer, which it moves and grows for each packet
// that arrives: with a 64 KiB pipe, that buffer stays near the channel's
// window (2 MiB), and sshd's copying cost more CPU than the whole job's
// receiving. Best effort: a pipe left at its size still works.
func growPipes(fs ...any) {
	for _, f := range fs {
		if f, ok := f.(*os.File); ok {
			var st unix.Stat_t
			if unix.Fstat(int(f.Fd()), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
				unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, pipeSize)
			}
		}
	}
}
