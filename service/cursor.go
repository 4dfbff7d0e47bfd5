package service

import (
	"encoding/base64"
	"encoding/json"
)

// Page cursors are opaque to callers: base64url of a JSON array whose first
// element names the list it belongs to, followed by the keyset of the last row
// returned. A cursor from another list, or garbage, is ErrInvalidInput.

// encodeCursor returns the cursor for a list kind and its keyset.
func encodeCursor(kind string, keys ...any) string {
	b, err := json.Marshal(append([]any{kind}, keys...))
	if err != nil {
		panic("roster: encoding a cursor: " + err.Error()) // keys are strings and integers
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor parses a cursor of the given kind into dst, one pointer per key.
// An empty cursor leaves dst untouched and returns false.
func decodeCursor(cursor, kind string, dst ...any) (bool, error) {
	if cursor == "" {
		return false, nil
	}
	bad := invalid("After", "not a cursor returned by this list")
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return false, bad
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil || len(parts) != len(dst)+1 {
		return false, bad
	}
	var k string
	if err := json.Unmarshal(parts[0], &k); err != nil || k != kind {
		return false, bad
	}
	for i, d := range dst {
		if err := json.Unmarshal(parts[i+1], d); err != nil {
			return false, bad
		}
	}
	return true, nil
}
