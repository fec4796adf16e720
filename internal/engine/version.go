package engine

import "github.com/bulkmove/bulkmove/internal/buildinfo"

// Version is this build's version (see package buildinfo); the agent
// cache on remote hosts is keyed by it, and every Hello carries it.
var Version = buildinfo.Get().Version
