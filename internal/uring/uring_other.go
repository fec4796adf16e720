//go:build !linux

package uring

// Ring is unavailable off Linux.
type Ring struct{}

// New reports ErrUnavailable off Linux.
func New(entries int) (*Ring, error) { return nil, ErrUnavailable }

// Load never runs off Linux.
func (r *Ring) Load(files []File) error { return ErrUnavailable }

// Close does nothing.
func (r *Ring) Close() error { return nil }
