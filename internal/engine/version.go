package engine

// Version is this build's version; the agent cache on remote hosts is
// keyed by it, and every Hello carries it.
var Version = "0.1.0-dev"
