// Package throttle is how gently a job runs on a live system: the
// bandwidth limit that the K streams share (--bwlimit, a rate or a
// timetable of rates, changed while the job runs by Halve and Double
// requests and by PUT /bwlimit), the rate the source disk is read at
// (--max-read-rate), and the CPU nice value and I/O class of the
// processes at both ends (--nice, --io-nice). See docs/gentle.md.
//
// It sits below internal/engine, which makes a job's Control and hands
// its bucket to the streams; cmd/bulkmove turns SIGUSR1 and SIGUSR2 into
// Requests. It must not import internal/engine, either end (send,
// receive), a transport or metrics: it steers a token bucket
// (internal/ratelimit) and the process, and knows nothing of streams,
// signals or the terminal.
package throttle
