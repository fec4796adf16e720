// Package model is the data model every other package of bulkmove shares:
// an Entry (one name of the tree being moved: its path, Kind, mode, size,
// times, owner, link target, a device's number), the Kind of an entry, and a Batch (the regular
// files sent together and acknowledged together).
//
// It also holds the entries' own binary codec (AppendEntry, ReadEntry,
// EntryCodec), which keeps every field, Dev and Ino included, for the lists
// of entries spilled to disk (package internal/spill). That codec is not the protocol:
// what travels between the two ends is package wire's encoding, which leaves
// Dev and Ino out.
//
// model is the leaf of the project: it imports nothing of bulkmove, so that
// the walk (sharder), the protocol (wire), the sending side and the receiving
// side can all name an Entry without depending on one another. Keep it that
// way: code that needs more than the standard library belongs elsewhere.
package model
