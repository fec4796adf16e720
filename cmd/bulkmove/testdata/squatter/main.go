// Command squatter is the attacker of TestSSHLingerSquatted: another user
// on the remote host who makes the path of a lingering agent's socket
// again after the agent is gone. It listens there, answers what a sender
// says as an agent would (an agent hub's banner of the old kind, naming
// EXE for the sender to run; or a proof it cannot make), and writes every
// byte it receives to stdout.
//
//	squatter SOCKET EXE
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

func main() {
	sock, exe := os.Args[1], os.Args[2]
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(sock, 0o777)
	var mu sync.Mutex
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			got := func(b []byte) {
				mu.Lock()
				os.Stdout.Write(b)
				mu.Unlock()
			}
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			br := bufio.NewReader(c)
			line, _ := br.ReadString('\n')
			got([]byte(line))
			if strings.HasPrefix(line, "NEW ") || strings.HasPrefix(line, "JOIN ") {
				// The old protocol: a banner naming another socket (which
				// no forwarding reaches) and EXE, the relay to run there.
				fmt.Fprintf(c, "BULKMOVE-HUB /nonexistent-squatted/hub.sock %s job=squatjob linger=squatlinger\n", exe)
			} else {
				fmt.Fprintf(c, "PROOF %s %s\n", strings.Repeat("a", 32), strings.Repeat("b", 64))
				fmt.Fprintf(c, "BULKMOVE-HUB2 /nonexistent-squatted/hub.sock %s job=squatjob linger=squatlinger\n", exe)
			}
			buf := make([]byte, 64<<10)
			for {
				c.SetReadDeadline(time.Now().Add(3 * time.Second))
				n, err := br.Read(buf)
				got(buf[:n])
				if err != nil {
					return
				}
			}
		}()
	}
}
