package send

// WithOpenHook returns s calling hook with each file's path before it is
// opened, for tests that hold an open back.
func (s Source) WithOpenHook(hook func(path string)) Source {
	s.openHook = hook
	return s
}

// Every file body over a TCP stream without hashes goes by sendfile in
// this package's tests, whatever its size: the conformance matrix's
// "tcp-sendfile" transport then runs that path on every test tree.
func init() { sendfileMin = 1 }
