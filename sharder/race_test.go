//go:build race

package sharder

// raceEnabled: the race detector multiplies memory use, so memory ceilings
// are not checked under it.
const raceEnabled = true
