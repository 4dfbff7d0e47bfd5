package main

import (
	"encoding/json"
	"os"
)

func statFile(path string) (os.FileInfo, error) { return os.Stat(path) }

// jsonLine encodes v on one line (for --follow).
func jsonLine(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
