//go:build !linux

package uring

// Ring is unavailable off Linux.
type Ring struct{}

// New reports ErrUnavailable off Linux.
func New(entries int) (*Ring, error) { return nil, ErrUnavailable }

// Load never runs off Linux.
func (r *Ring) Load(files []File) error { return ErrUnavailable }

// Create never runs off Linux.
func (r *Ring) Create(files []NewFile) error { return ErrUnavailable }

// CloseAll never runs off Linux.
func (r *Ring) CloseAll(fds []int, errs []error) error { return ErrUnavailable }

// Entries is the size of the rings Get hands out.
const Entries = 128

// Get returns nil off Linux: no io_uring.
func Get() *Ring { return nil }

// Put does nothing off Linux.
func Put(r *Ring, broken bool) {}

// Close does nothing.
func (r *Ring) Close() error { return nil }
