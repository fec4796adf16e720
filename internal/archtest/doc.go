// Package archtest holds no code: its test checks the direction of the
// imports between bulkmove's packages, so that an arrow pointing the wrong
// way fails `go test` instead of waiting for a reviewer to notice.
//
// The packages sit in layers, and an arrow may only point down:
//
//	cmd/bulkmove                     flags, output, exit codes
//	internal/engine                  the move as a library
//	internal/engine/...              its parts (--bwlimit, --delete, verify); never import it
//	send, receive/..., transport/... the two ends and the links between them
//	metrics                          the ends report into it; it imports neither
//	sharder, filter, journal         the walk, its filters, the resume journal
//	wire                             the protocol; imports only model
//	model                            Entry, Kind, Batch; imports nothing of ours
//
// The rules are the rows of a table in arch_test.go, each naming the
// packages it constrains and the project packages they may or may not
// depend on (directly or through others: go list's Deps). A row marked
// pending states a rule the tree does not keep yet, with the reason; the
// test logs it and checks nothing, and removing the mark turns it on.
//
// archtest must import nothing; only its test runs `go list`.
package archtest
