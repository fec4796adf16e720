//go:build !linux

package netnstest

import "errors"

// Do needs Linux's network namespaces.
func Do(ns string, f func()) error {
	return errors.New("network namespaces need Linux")
}
