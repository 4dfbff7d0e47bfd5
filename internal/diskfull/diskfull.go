// Package diskfull gives tests a small file system of their own to fill up:
// a tmpfs of a given size (Linux, as root; CI runs there), and a filler
// that writes until the file system is full. Where a tmpfs cannot be
// mounted, Mount skips the test, except under CI (the environment variable
// CI set), which must run every disk-full test.
package diskfull

import (
	"errors"
	"os"
	"syscall"
)

// Fill writes to a new file at path until the file system is full (ENOSPC),
// and returns nil then; any other error is returned.
func Fill(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	block := make([]byte, 64<<10)
	for {
		if _, err := f.Write(block); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
	}
}
