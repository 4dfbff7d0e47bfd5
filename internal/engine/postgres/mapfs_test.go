package postgres

import (
	"io/fs"
	"testing/fstest"
)

// mapFS turns file bodies into migrations.
func mapFS(files map[string]string) fs.FS {
	out := fstest.MapFS{}
	for name, body := range files {
		out[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return out
}
