// Package linger keeps, on the sending host, what a later push needs to
// reach an agent that a push with --linger left running on the remote host
// (see receive/agentd): the agent's socket and a token the agent gave only
// to that push. The later push then opens its streams through sshd's
// forwarding to the socket: no login shell (whose profile can cost most of
// a short incremental pass), no new process, no upload check.
//
// A record is a file of this user's state directory (journal.StateDir),
// 0600, one per account and agent binary; pushes to the same account take
// turns with it (Lock), as its token works once. Nothing in a record is
// run: the agent's binary is the sender's own choice.
package linger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/bulkmove/bulkmove/journal"
)

// Record is what this host keeps of a lingering agent: where its
// socket is, and the token the next job proves it holds (each job gets the
// next one). Nothing in it is run: the agent's binary is the sender's own
// choice.
type Record struct {
	Sock  string `json:"sock"`
	Token string `json:"token"`
}

// Path is where the record of the agent of this binary (binary: its
// hash, or the --remote-bulkmove path) for an account (user@host:port)
// lives: under the state directory, 0600. (Records of agents whose socket
// proved nothing, with another name, are not read.)
func Path(endpoint, binary string) (string, error) {
	dir, err := journal.StateDir()
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte("bulkmove linger 2\x00" + endpoint + "\x00" + binary))
	return filepath.Join(dir, "linger", hex.EncodeToString(h[:12])+".json"), nil
}

// Load returns the record at path, or nil if there is none that can
// be used.
func Load(path string) *Record {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var r Record
	if json.Unmarshal(b, &r) != nil || r.Sock == "" || r.Token == "" {
		return nil
	}
	return &r
}

// Lock locks the record at path for this process (a lock file
// beside it): pushes to the same account take turns using its token, which
// works once. The returned function unlocks; it may be called more than
// once.
func Lock(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("locking the lingering agent's record: %w", err)
	}
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the lingering agent's record: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the lingering agent's record %s: %w", f.Name(), err)
	}
	var once sync.Once
	return func() { once.Do(func() { f.Close() }) }, nil
}

// Save writes the record atomically, readable by this user only.
func Save(path string, r Record) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("keeping the lingering agent's address: %w", err)
	}
	b, _ := json.Marshal(r)
	// A temporary of its own (CreateTemp makes it 0600): two pushes to the
	// same host may save at once.
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("keeping the lingering agent's address: %w", err)
	}
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("keeping the lingering agent's address: %w", werr)
	}
	return nil
}
