// Package deletion is the sending side of --delete: it lists SRC again,
// one directory at a time, and has the receivers remove from each DEST
// directory what the source directory does not hold (the receiving half,
// which lists DEST and removes, is receive.Prune and receive/extract).
//
// A Deleter is one job's --delete. Its Pass runs as the pool's
// BeforeFinal step, after the file data and hard links and before
// directory metadata; DryRun lists what would go, for --dry-run. Around
// the listing it keeps the rules that make a --delete safe to run:
//
//   - nothing is deleted if the job had errors so far (a source file that
//     could not be read must not cost its copy);
//   - the guard (unless --no-delete-guard): a first pass only counts what
//     would go, and nothing is deleted if SRC selected nothing or if more
//     than half of at least 1,000 entries would go; the deleting pass then
//     removes the counted entries alone, and stops if DEST changed so that
//     more would;
//   - --max-delete N: at most N entries go, on one connection, and the
//     rest are counted as held;
//   - --delete-excluded: what the filters exclude goes too.
//
// Extras is the listing alone, which bulkmove verify uses to find what
// DEST has beyond SRC.
//
// It sits below internal/engine, which builds its Options from the job's
// Config and counts its errors among the job's: it must not import
// internal/engine (nor cmd). It drives the receivers through send.Conn
// (send.RunPrune, send.Pruner) and speaks wire.PruneRequest.
package deletion
