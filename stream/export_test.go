package stream

// WithOpenHook returns s calling hook with each file's path before it is
// opened, for tests that hold an open back.
func (s Source) WithOpenHook(hook func(path string)) Source {
	s.openHook = hook
	return s
}
