//go:build race

package receive_test

const raceEnabled = true
