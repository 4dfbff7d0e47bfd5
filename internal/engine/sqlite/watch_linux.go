package sqlite

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
)

// watchWAL reports writes to the WAL file of the database at path through
// inotify: a watch on its directory (the WAL file comes and goes), whose
// events name the file. The channel holds at most one pending write; it is
// closed if the watch fails. Writes through mmap (the -shm file) are not
// reported, commits to the WAL file are.
func watchWAL(path string) (<-chan struct{}, func(), error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, err
	}
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, nil, err
	}
	if _, err := syscall.InotifyAddWatch(fd, filepath.Dir(abs), syscall.IN_MODIFY|syscall.IN_CREATE|syscall.IN_MOVED_TO); err != nil {
		_ = syscall.Close(fd)
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fd), "inotify") // non-blocking: reads park in the poller
	wal := filepath.Base(abs) + "-wal"
	writes := make(chan struct{}, 1)
	go func() {
		defer close(writes)
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
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
					case writes <- struct{}{}:
					default:
					}
				}
				off = start + nameLen
			}
		}
	}()
	return writes, func() { _ = f.Close() }, nil
}
