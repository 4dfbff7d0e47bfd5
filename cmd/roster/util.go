package main

import "encoding/json"

// jsonLine encodes v on one line (for --follow).
func jsonLine(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
