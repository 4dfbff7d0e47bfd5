package service

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

const (
	maxIdentifierBytes = 256
	maxReasonBytes     = 256
	maxFailReasonBytes = 4096
	maxTTL             = 30 * 24 * time.Hour
	defaultLimit       = 1000
	maxLimit           = 10000
)

// validIdentifier checks the identifier rule (README, errors): non-empty, at most
// 256 bytes, valid UTF-8, no control characters.
func validIdentifier(field, v string) error {
	if v == "" {
		return invalid(field, "must not be empty")
	}
	return validText(field, v, maxIdentifierBytes)
}

// CheckIdentifier checks v against the rule of every identifier argument
// (a namespace, an instance or worker id, a lane, a schedule's name, a
// unique key): 1 to 256 bytes of valid UTF-8 without control characters.
// It returns nil, or ErrInvalidInput naming field: for a caller that checks
// its arguments before it opens a Store, as the Store would.
func CheckIdentifier(field, v string) error { return validIdentifier(field, v) }

// validOptionalIdentifier is validIdentifier where "" means none.
func validOptionalIdentifier(field, v string) error {
	if v == "" {
		return nil
	}
	return validIdentifier(field, v)
}

// validText checks one-line text of at most maxBytes bytes (identifiers, a
// worker's death reason): valid UTF-8, no control character at all (no
// newline, no tab). Free text that may span lines is validFreeText's.
func validText(field, v string, maxBytes int) error {
	if len(v) > maxBytes {
		return invalid(field, "%d bytes exceeds the limit of %d", len(v), maxBytes)
	}
	if !utf8.ValidString(v) {
		return invalid(field, "not valid UTF-8")
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return invalid(field, "contains control character %U", r)
		}
	}
	return nil
}

// identifierSet validates each element and returns a sorted copy without
// duplicates (nil when empty).
func identifierSet(field string, vs []string) ([]string, error) {
	if len(vs) == 0 {
		return nil, nil
	}
	for i, v := range vs {
		if err := validIdentifier(fmt.Sprintf("%s[%d]", field, i), v); err != nil {
			return nil, err
		}
	}
	out := slices.Clone(vs)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// validTTL checks a duration against the TTL rule: 1 ms to 30 days, whole
// milliseconds counted (sub-millisecond remainders are truncated).
func validTTL(field string, d time.Duration) error {
	if d < time.Millisecond {
		return invalid(field, "%v is below the minimum of 1ms", d)
	}
	if d > maxTTL {
		return invalid(field, "%v exceeds the maximum of 720h", d)
	}
	return nil
}

// The range of every time argument: from the Unix epoch to the end
// of year 9999, so that a millisecond count never wraps around.
var (
	minTime = time.Unix(0, 0).UTC()
	maxTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// validTime checks a time argument against the range; zero (the Store's
// clock) is always valid.
func validTime(field string, t time.Time) error {
	if t.IsZero() || (!t.Before(minTime) && t.Before(maxTime)) {
		return nil
	}
	return invalid(field, "%s lies outside the years 1970 to 9999", t.UTC().Format(time.RFC3339Nano))
}

// pageLimit applies the list limit rule: 0 means 1000, above 10000 is clamped,
// negative is invalid.
func pageLimit(limit int) (int, error) {
	switch {
	case limit < 0:
		return 0, invalid("Limit", "%d is negative", limit)
	case limit == 0:
		return defaultLimit, nil
	case limit > maxLimit:
		return maxLimit, nil
	}
	return limit, nil
}

// validFreeText checks free text that may span lines (a fail or cancel
// reason, a stack trace): valid UTF-8, no NUL byte (newlines and tabs are
// kept), at most maxBytes bytes. One-line text is validText's.
func validFreeText(field, v string, maxBytes int) error {
	if len(v) > maxBytes {
		return invalid(field, "%d bytes exceeds the limit of %d", len(v), maxBytes)
	}
	if !utf8.ValidString(v) {
		return invalid(field, "not valid UTF-8")
	}
	if strings.IndexByte(v, 0) >= 0 {
		return invalid(field, "contains a NUL byte")
	}
	return nil
}
