// Package connstr hides the passwords of database connection strings: in the
// string itself, for display, and in any text (an error message) that may
// quote it whole, in part, or in a form a driver rewrote.
//
// It knows every form a PostgreSQL connection string takes: a URL
// (postgres:// or postgresql://, or any scheme://) with a password in its
// user information, single- or multi-host, parsable by net/url or not, a
// password or sslpassword query parameter, and the keyword/value form
// (host=h password=secret, quoted or not). It errs on the side of hiding
// too much: in a string it cannot read (a password holding '@' or '?'
// unescaped, say), more than the password may be replaced.
package connstr

import (
	"errors"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Mask replaces every password.
const Mask = "xxxxx"

// span is a half-open byte range [start, end) of a string.
type span struct{ start, end int }

// Redact returns s, a connection string or a file path, with every password
// it holds replaced by Mask. A string without a password is returned as is.
func Redact(s string) string {
	return replaceSpans(s, spans(s))
}

// Secrets returns the passwords s holds, each as written and, where it
// differs, decoded (percent-escapes of a URL, backslash escapes of a quoted
// keyword value). Empty passwords are left out.
func Secrets(s string) []string {
	var out []string
	add := func(v string) {
		if v != "" && !contains(out, v) {
			out = append(out, v)
		}
	}
	for _, sp := range spans(s) {
		raw := s[sp.start:sp.end]
		add(raw)
		if v, err := url.PathUnescape(raw); err == nil {
			add(v)
		}
		if v, err := url.QueryUnescape(raw); err == nil {
			add(v)
		}
		if len(raw) >= 2 && raw[0] == '\'' && raw[len(raw)-1] == '\'' {
			add(unquoteKeyword(raw))
		}
	}
	return out
}

// Scrub returns text with every password hidden: those of the connection
// strings conns wherever they appear in text (whole or alone), and any that
// text itself shows in a URL or a password= keyword, such as a driver's
// half-redacted copy of a connection string.
func Scrub(text string, conns ...string) string {
	var secrets []string
	for _, c := range conns {
		if c == "" {
			continue
		}
		if r := Redact(c); r != c {
			text = strings.ReplaceAll(text, c, r)
		}
		secrets = append(secrets, Secrets(c)...)
	}
	// The longest first, so that a password holding another is replaced
	// whole.
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	for _, s := range secrets {
		text = strings.ReplaceAll(text, s, Mask)
	}
	return replaceSpans(text, textSpans(text))
}

// ScrubError returns err with its text scrubbed (see Scrub) of the passwords
// of conns, or err itself when its text shows none. errors.Is still sees the
// sentinels err wraps; nothing else of err is reachable through it, since
// the text of a wrapped error may hold the password.
func ScrubError(err error, conns ...string) error {
	if err == nil {
		return nil
	}
	msg := Scrub(err.Error(), conns...)
	if msg == err.Error() {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}

// scrubbedError is an error whose text lost a password.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }

// Is lets errors.Is see the sentinels of the original error, not its text.
func (e *scrubbedError) Is(target error) bool { return errors.Is(e.err, target) }

// passwordKeys are the query parameters and keywords whose values are
// secrets: the password, and that of the client's TLS key.
var passwordKeys = map[string]bool{"password": true, "sslpassword": true}

// spans finds the passwords of one connection string.
func spans(s string) []span {
	if i := strings.Index(s, "://"); i >= 0 {
		return urlSpans(s, i+len("://"))
	}
	return keywordSpans(s, 0)
}

// urlSpans finds the passwords of a URL whose authority starts at from: in
// the user information, and in the query.
func urlSpans(s string, from int) []span {
	var out []span
	rest := s[from:]
	query := 0 // where to look for the query, relative to rest
	colon, firstAt := strings.IndexByte(rest, ':'), strings.IndexByte(rest, '@')
	if colon >= 0 && firstAt > colon && !strings.ContainsAny(rest[:colon], "/?#") {
		// The password runs from the first ':' to the last '@' of the
		// authority; an '@' in the password itself may be unescaped. The
		// authority ends at the first '?' or '#' after the first '@'.
		end := len(rest)
		if i := strings.IndexAny(rest[firstAt:], "?#"); i >= 0 {
			end = firstAt + i
		}
		lastAt := strings.LastIndexByte(rest[:end], '@')
		if lastAt > colon+1 {
			out = append(out, span{from + colon + 1, from + lastAt})
		}
		query = lastAt
	}
	q := strings.IndexByte(rest[query:], '?')
	if q < 0 {
		return out
	}
	start := from + query + q + 1
	for start <= len(s) {
		end := strings.IndexAny(s[start:], "&#")
		if end < 0 {
			end = len(s) - start
		}
		param := s[start : start+end]
		if k, _, ok := strings.Cut(param, "="); ok {
			if key, err := url.QueryUnescape(k); err == nil && passwordKeys[strings.ToLower(strings.TrimSpace(key))] {
				out = append(out, span{start + len(k) + 1, start + end})
			}
		}
		if start+end >= len(s) || s[start+end] == '#' {
			break
		}
		start += end + 1
	}
	return out
}

// keyword matches a password keyword of the keyword/value form and its
// value: 'quoted, with \' and \\ escapes' or up to the next space.
var keyword = regexp.MustCompile(`(?i)(?:^|[\s,;(])(?:ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'?|[^\s]*)`)

// keywordSpans finds the values of password keywords in s, from offset.
func keywordSpans(s string, offset int) []span {
	var out []span
	for _, m := range keyword.FindAllStringSubmatchIndex(s, -1) {
		if m[3] > m[2] {
			out = append(out, span{offset + m[2], offset + m[3]})
		}
	}
	return out
}

// unquoteKeyword decodes a quoted keyword value.
func unquoteKeyword(v string) string {
	v = v[1 : len(v)-1]
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// urlInText matches a URL's scheme in free text.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://`)

// textSpans finds the passwords that free text shows: in each URL (up to the
// next space or quote) and in each password keyword outside URLs.
func textSpans(text string) []span {
	var out []span
	last := 0
	for _, m := range urlInText.FindAllStringIndex(text, -1) {
		if m[0] < last {
			continue
		}
		out = append(out, keywordSpans(text[last:m[0]], last)...)
		end := len(text)
		if i := strings.IndexAny(text[m[1]:], " \t\n\"`"); i >= 0 {
			end = m[1] + i
		}
		out = append(out, urlSpans(text[:end], m[1])...)
		last = end
	}
	return append(out, keywordSpans(text[last:], last)...)
}

// replaceSpans replaces each span of s (overlapping ones merged) with Mask.
func replaceSpans(s string, spans []span) string {
	if len(spans) == 0 {
		return s
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	var b strings.Builder
	at := 0
	for _, sp := range spans {
		if sp.start < at { // overlaps the span just masked
			at = max(at, sp.end)
			continue
		}
		b.WriteString(s[at:sp.start])
		b.WriteString(Mask)
		at = sp.end
	}
	b.WriteString(s[at:])
	return b.String()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
