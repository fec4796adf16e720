// Package shell holds what talking to a remote POSIX shell needs on this
// side: Quote makes any string one word of a command line, and LastLines
// cuts a command's output down to the lines an error message quotes.
//
// transport/sshx (remote commands over SSH) and transport/sshx/agentbin
// (the scripts that find and install the remote bulkmove) share it. It
// imports nothing of bulkmove.
package shell

import "strings"

// Quote quotes s as one word for a POSIX shell (and csh, for words
// without "!" or newlines).
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			strings.ContainsRune("-_./+,:@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// LastLines returns the last n non-blank lines of s, trimmed and joined
// with "; ", for an error message.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var out []string
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}
