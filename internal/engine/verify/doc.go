// Package verify is bulkmove verify and verify-summary: it compares SRC
// with DEST, and merges the reports of several shards.
//
// Run walks SRC as a move would (sharder: batches, filters, --shard,
// --files-from), has each receiver compare the batch's entries with what
// DEST holds (send.Verifier: metadata, and content unless told not to),
// then lists what DEST has beyond SRC (deletion.Extras, the listing of
// --delete, which removes nothing). Each difference goes on stdout
// ("differ", "missing", "extra"), or as a --json "difference" event
// followed by one event.VerifyEvent with the counts; the run ends in a
// Status, which the engine maps to its outcome.
//
// Summary reads the --json reports of verify --shard i/N, one a shard,
// and merges them: every difference sorted by path, the totals, and a
// failure if a shard's report is missing, repeated or incomplete.
//
// It sits below internal/engine, which resolves SRC and DEST, opens the
// streams and builds the walk's options: it must not import
// internal/engine (nor cmd). Its events are package event's, which the
// engine shares.
package verify
