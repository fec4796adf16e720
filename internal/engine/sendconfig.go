package engine

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/internal/engine/throttle"
)

// A pull runs the sending side on the remote host (bulkmove send-hub) and
// gives it the job's Config whole, as one argument (--config, JSON in
// base64), rather than a command line rebuilt flag by flag: an option that
// changes what moves or how reaches the sender without a second list of
// flags to keep in step. What only this host uses is left out (forSender).

// senderConfig is what travels: the Config, and the filter rules, which
// a Config holds as a parsed list.
type senderConfig struct {
	Config  Config   `json:"config"`
	Filters []string `json:"filters,omitempty"`
}

// forSender is c as a pull's remote sender takes it, over streams
// streams: without what only the puller uses (its log, metrics, progress
// and --json, how it reaches the remote host, --bwlimit, which the puller
// applies to what it receives, and its journal) and without -j auto (the
// puller opened the streams).
func (c Config) forSender(streams int) Config {
	s := c
	s.Jobs, s.Auto = streams, AutoJobs{Max: c.Auto.Max}
	s.LogFile, s.LogLevel = "", DefaultConfig().LogLevel
	s.Obs = DefaultConfig().Obs
	s.Progress, s.JSON, s.Verbose, s.Itemize = "none", false, false, false
	s.OutFormat, s.LogFileFormat = "", ""
	s.SSH, s.Serve = SSHConfig{}, ServeClient{}
	s.Transport, s.DataPorts, s.DataAddr, s.ViaAgent = DefaultConfig().Transport, "", "", false
	s.Gentle.BwLimit = throttle.Schedule{}
	s.Journal = ""
	s.DryRun = false
	// The remote end's --fake-super is the sender's own there.
	s.Faithful.FakeSuper, s.Faithful.RemoteFakeSuper, s.Faithful.RemoteSuper = c.Faithful.RemoteFakeSuper, false, false
	return s
}

// EncodeSenderConfig is c, for the sender, as send-hub's --config takes it.
func EncodeSenderConfig(c Config) (string, error) {
	sc := senderConfig{Config: c}
	if c.Rules != nil {
		sc.Filters = c.Rules.List()
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return "", fmt.Errorf("the sender's options: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// DecodeSenderConfig reads send-hub's --config.
func DecodeSenderConfig(s string) (Config, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Config{}, fmt.Errorf("--config: %w", err)
	}
	sc := senderConfig{Config: DefaultConfig()}
	if err := json.Unmarshal(b, &sc); err != nil {
		return Config{}, fmt.Errorf("--config: %w", err)
	}
	c := sc.Config
	c.Rules = new(filter.Rules)
	for _, r := range sc.Filters {
		if err := c.Rules.Flag(filter.Filter).Set(r); err != nil {
			return Config{}, fmt.Errorf("--config: filter %q: %w", r, err)
		}
	}
	return c, nil
}
