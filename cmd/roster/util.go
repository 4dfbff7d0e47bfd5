package main

import (
	"encoding/json"
	"time"
)

// jsonLine encodes v on one line (for --follow).
func jsonLine(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// agoFromNow is the time d before now, or the Unix epoch when that lies
// before it: an --older-than that long prunes nothing, since nothing stored
// is older than 1970.
func agoFromNow(d time.Duration) time.Time {
	epoch := time.Unix(0, 0)
	if t := time.Now().Add(-d); t.After(epoch) {
		return t
	}
	return epoch
}
