//go:build !race

package send_test

const raceEnabled = false
