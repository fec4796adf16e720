//go:build !linux

package journal

import "os"

func datasync(f *os.File) error { return f.Sync() }

// syncDir makes a new name in dir durable where the system can; it is
// best effort here (Windows, for one, cannot sync a directory).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	d.Sync()
	return nil
}
