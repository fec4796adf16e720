//go:build race

package send_test

const raceEnabled = true
