//go:build !linux

package sshx

import (
	"net"
	"time"
)

func withQuickAck(c net.Conn) net.Conn { return c }

func kernelRTT(net.Conn) (time.Duration, bool) { return 0, false }
