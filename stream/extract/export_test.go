package extract

// KnownInMem is how many hard-link targets r keeps in memory (for tests).
func KnownInMem(r *Receiver) int { return r.known.InMem() }

// KnownTables is how many tables of hard-link targets r has on disk.
func KnownTables(r *Receiver) int { return r.known.Tables() }
