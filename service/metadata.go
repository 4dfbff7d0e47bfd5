package service

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The bounds of an execution's Metadata.
const (
	maxMetadataEntries    = 64
	maxMetadataValueBytes = 4 << 10
	maxMetadataBytes      = 16 << 10
)

// encodeMetadata validates an execution's metadata and returns it as the
// JSON object stored with it ("" for none: nil or empty). Keys are
// identifiers, values valid UTF-8 of at most 4 KiB, at most 64 entries of
// at most 16 KiB in all; a bad entry is ErrInvalidInput naming its key.
func encodeMetadata(field string, m map[string]string) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	if len(m) > maxMetadataEntries {
		return "", invalid(field, "%d entries exceeds the limit of %d", len(m), maxMetadataEntries)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	total := 0
	for _, k := range keys {
		name := fmt.Sprintf("%s[%s]", field, strconv.Quote(k))
		if err := validIdentifier(name+" key", k); err != nil {
			return "", err
		}
		v := m[k]
		if len(v) > maxMetadataValueBytes {
			return "", invalid(name, "value of %d bytes exceeds the limit of 4 KiB", len(v))
		}
		if !utf8.ValidString(v) {
			return "", invalid(name, "value is not valid UTF-8")
		}
		total += len(k) + len(v)
		if total > maxMetadataBytes {
			return "", invalid(name, "keys and values exceed the limit of 16 KiB in all")
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("roster: encode %s: %w", field, err)
	}
	return string(b), nil
}

// decodeMetadata reads stored metadata: nil for none (and for text that
// is not a JSON object of strings, which roster never stores).
func decodeMetadata(s string) map[string]string {
	if s == "" {
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil || len(m) == 0 {
		return nil
	}
	return m
}
