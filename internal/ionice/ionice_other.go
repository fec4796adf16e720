//go:build !linux

package ionice

import (
	"errors"
	"fmt"
	"runtime"
)

var errUnsupported = fmt.Errorf("ionice: %w on %s", errors.ErrUnsupported, runtime.GOOS)

// SetIdle is not supported here: it returns an error.
func SetIdle() error { return errUnsupported }

// SetBestEffort is not supported here: it returns an error.
func SetBestEffort(level int) error { return errUnsupported }

// Get is not supported here: it returns an error.
func Get() (class, level int, err error) { return 0, 0, errUnsupported }

// SetNice is not supported here: it returns an error.
func SetNice(n int) error { return errUnsupported }
