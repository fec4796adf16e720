package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bulkmove/bulkmove/journal"
)

// A push with --linger leaves its agent hub running on the remote host for
// a while after the job (agent --linger), and keeps on this host what a
// later push needs to reach it: the hub's socket and a token the hub gave
// only to that push. The later push then opens its streams through sshd's
// forwarding to the socket: no login shell (whose profile can cost most of
// a short incremental pass), no new process, no upload check.

// lingerRecord is what this host keeps of a lingering agent.
type lingerRecord struct {
	Sock  string `json:"sock"`
	Exe   string `json:"exe"`
	Token string `json:"token"`
}

// lingerPath is where the record of the agent of this binary (binary: its
// hash, or the --remote-bulkmove path) for an account (user@host:port)
// lives: under the state directory, 0600.
func lingerPath(endpoint, binary string) (string, error) {
	dir, err := journal.StateDir()
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte("bulkmove linger 1\x00" + endpoint + "\x00" + binary))
	return filepath.Join(dir, "linger", hex.EncodeToString(h[:12])+".json"), nil
}

// loadLinger returns the record at path, or nil if there is none that can
// be used.
func loadLinger(path string) *lingerRecord {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var r lingerRecord
	if json.Unmarshal(b, &r) != nil || r.Sock == "" || r.Token == "" {
		return nil
	}
	return &r
}

// saveLinger writes the record atomically, readable by this user only.
func saveLinger(path string, r lingerRecord) error {
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
