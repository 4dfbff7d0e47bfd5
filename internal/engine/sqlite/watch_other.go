//go:build !linux

package sqlite

import "errors"

// watchWAL cannot hear writes to the WAL file on this system: the change
// check polls.
func watchWAL(string) (<-chan struct{}, func(), error) {
	return nil, nil, errors.New("no file notifications on this system")
}
