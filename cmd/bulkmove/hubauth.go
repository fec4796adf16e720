package main

import (
	"bufio"
	"io"

	"github.com/bulkmove/bulkmove/internal/linger"
	"github.com/bulkmove/bulkmove/internal/rundir"
	"github.com/bulkmove/bulkmove/wire"
)

// The hub handshake is package wire's (wire/hub.go), the private socket
// directory package rundir's; the sender's files call them by these
// names.
const (
	agentBanner   = wire.AgentBanner
	lingerRefused = wire.Refused
	hubProofLine  = wire.HubProof
	hubMaxLine    = wire.HubMaxLine
)

var (
	proveToHub    = wire.ProveToHub
	proveFromHub  = wire.AcceptHub
	readHubLine   = wire.ReadHubLine
	jobID         = wire.JobID
	randomToken   = wire.NewToken
	errNotAgent   = wire.ErrNotAgent
	listenPrivate = rundir.Listen
)

// bufferedConn reads through the bufio.Reader the handshake was read
// with, and writes and closes the connection.
type bufferedConn struct {
	*bufio.Reader
	io.WriteCloser
}

// The records of lingering agents are package linger's.
type lingerRecord = linger.Record

var (
	lingerPath = linger.Path
	loadLinger = linger.Load
	lockLinger = linger.Lock
	saveLinger = linger.Save
)
