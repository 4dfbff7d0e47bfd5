//go:build !linux

package sqlite

import "errors"

// walWatcher cannot hear writes to the WAL file on this system: the change
// check polls.
type walWatcher struct{ writes chan struct{} }

func newWALWatcher(string) (*walWatcher, error) {
	return nil, errors.New("no file notifications on this system")
}

func (w *walWatcher) start() error { return nil }
func (w *walWatcher) stop()        {}
func (w *walWatcher) close()       {}
