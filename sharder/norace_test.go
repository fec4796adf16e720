//go:build !race

package sharder

const raceEnabled = false
