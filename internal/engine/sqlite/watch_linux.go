package sqlite

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
)

// walWatcher reports writes to the WAL file of a database through inotify:
// one instance for the engine's life (its descriptor is never reused under a
// reader still parked on it), a watch on the database's directory (the WAL
// file comes and goes) added while someone listens and removed between.
// Writes through mmap (the -shm file) are not reported; commits to the WAL
// file are.
type walWatcher struct {
	f      *os.File
	fd     int
	dir    string
	wd     int // the directory's watch, or -1
	writes chan struct{}
}

// newWALWatcher opens the inotify instance and its reader for the database
// at path.
func newWALWatcher(path string) (*walWatcher, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	w := &walWatcher{
		f:  os.NewFile(uintptr(fd), "inotify"), // non-blocking: reads park in the poller
		fd: fd, dir: filepath.Dir(abs), wd: -1, writes: make(chan struct{}, 1),
	}
	go w.read(filepath.Base(abs) + "-wal")
	return w, nil
}

// read relays the events that name the WAL file, until the instance closes
// (then writes closes).
func (w *walWatcher) read(wal string) {
	defer close(w.writes)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
			start := off + syscall.SizeofInotifyEvent
			name := buf[start:min(start+nameLen, n)]
			for len(name) > 0 && name[len(name)-1] == 0 {
				name = name[:len(name)-1]
			}
			if string(name) == wal {
				select {
				case w.writes <- struct{}{}:
				default:
				}
			}
			off = start + nameLen
		}
	}
}

// start adds the directory's watch.
func (w *walWatcher) start() error {
	wd, err := syscall.InotifyAddWatch(w.fd, w.dir, syscall.IN_MODIFY|syscall.IN_CREATE|syscall.IN_MOVED_TO)
	if err != nil {
		return err
	}
	w.wd = wd
	return nil
}

// stop removes the directory's watch: no events while nobody listens.
func (w *walWatcher) stop() {
	if w.wd >= 0 {
		_, _ = syscall.InotifyRmWatch(w.fd, uint32(w.wd))
		w.wd = -1
	}
}

func (w *walWatcher) close() { _ = w.f.Close() }
