// Package receive is the receiving side of a move: the hub that serves a
// job's streams on the receiving host and applies what they carry with one
// shared receiver (package receive/extract, which holds the safety rules).
//
// What it provides:
//
//   - Hub, one job on the receiving host: it opens the receiver on the
//     destination when the first stream's handshake arrives, granting the
//     safety options the sender asks for within the hub's Policy, and
//     serves each stream (Hub.Serve) over any reader and writer: the
//     handshake (refused with wire.Refuse, both protocol versions named
//     on a mismatch), the quick check that answers each manifest with a
//     need list, the data (decompressed here when the sender compressed
//     it, bounded against decompression bombs), commits and
//     acknowledgements. The manifests a job holds before their data are
//     bounded (MemoryBudget, shared by every job of a daemon).
//   - Serve and ServeWith, one stream served by a hub of its own.
//   - ApplyPrune and Pruning, the receiving half of --delete: what a
//     prune request does not name goes, in parts for large directories.
//
// The daemons that run hubs are below it: receive/agentd (the agent a
// sender starts over SSH) and receive/serve (the standing TLS daemon).
//
// Where it sits: receive imports the data model, the wire and the
// receiver (receive/extract). It must not import the sending side
// (package send): the two ends meet only through the wire, and the tests
// in internal/archtest keep it so.
package receive
