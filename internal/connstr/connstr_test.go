package connstr

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// Nothing to hide.
		{"fleet.db", "fleet.db"},
		{"/var/lib/roster/fleet.db", "/var/lib/roster/fleet.db"},
		{":memory:", ":memory:"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://h1:5432,h2:5432/db?sslmode=disable", "postgres://h1:5432,h2:5432/db?sslmode=disable"},
		{"postgres://u@h:5432/db?application_name=a@b", "postgres://u@h:5432/db?application_name=a@b"},
		{"host=h dbname=d", "host=h dbname=d"},
		{"/data/password=x.db", "/data/password=x.db"},
		// A URL's user information, single- and multi-host.
		{"postgres://u:pw@h/db", "postgres://u:xxxxx@h/db"},
		{"postgresql://u:pw@h:5432/db?sslmode=disable&search_path=roster", "postgresql://u:xxxxx@h:5432/db?sslmode=disable&search_path=roster"},
		{"postgres://u:pw@h1,h2/db", "postgres://u:xxxxx@h1,h2/db"},
		{"postgres://u:pw@h1:5432,h2:5433/db", "postgres://u:xxxxx@h1:5432,h2:5433/db"},
		{"postgres://u:p%40ss@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://:pw@h/db", "postgres://:xxxxx@h/db"},
		// Passwords net/url cannot read: unescaped ':', '@', '/', '?', ' '.
		{"postgres://u:s3:cr3t@h1:5432,h2:x/db", "postgres://u:xxxxx@h1:5432,h2:x/db"},
		{"postgres://u:s3@cr3t@[::1/db", "postgres://u:xxxxx@[::1/db"},
		{"postgres://u:s3/cr3t@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u:s3?cr3t@h/db?sslmode=disable", "postgres://u:xxxxx@h/db?sslmode=disable"},
		{"postgres://u:s3 cr3t@h/db", "postgres://u:xxxxx@h/db"},
		// Query parameters.
		{"postgres://h/db?password=pw", "postgres://h/db?password=xxxxx"},
		{"postgres://h1:5432,h2:5432/db?sslmode=disable&password=pw&x=1", "postgres://h1:5432,h2:5432/db?sslmode=disable&password=xxxxx&x=1"},
		{"postgres://u:pw@h/db?sslpassword=k&password=pw2#frag", "postgres://u:xxxxx@h/db?sslpassword=xxxxx&password=xxxxx#frag"},
		{"postgres://h/db?pass%77ord=pw", "postgres://h/db?pass%77ord=xxxxx"},
		// The keyword/value form.
		{"host=h password=pw dbname=d", "host=h password=xxxxx dbname=d"},
		{"password=pw host=h", "password=xxxxx host=h"},
		{"host=h password = pw", "host=h password = xxxxx"},
		{`host=h password='p w\'x' dbname=d`, "host=h password=xxxxx dbname=d"},
		{"host=h sslpassword=k password=", "host=h sslpassword=xxxxx password="},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := Redact(tc.in); got != tc.want {
				t.Fatalf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestScrub(t *testing.T) {
	for _, tc := range []struct {
		name   string
		text   string
		conn   string
		secret []string // none may remain
		keep   []string // each must remain
	}{
		{"the whole URL", "cannot open postgres://u:s3cr3t@h/db: refused", "postgres://u:s3cr3t@h/db",
			[]string{"s3cr3t"}, []string{"postgres://u:xxxxx@h/db", "refused"}},
		{"the password alone", `server said "s3cr3t" is wrong`, "postgres://u:s3cr3t@h1:1,h2:2/db",
			[]string{"s3cr3t"}, []string{"is wrong"}},
		{"decoded", "pw p@ss!", "postgres://u:p%40ss%21@h/db", []string{"p@ss!"}, []string{"pw"}},
		{"a driver's half-redacted copy", "cannot parse `postgres://u:s3:xxxxxx@[::1/db`: missing ']'", "postgres://u:s3:cr3t@[::1/db",
			[]string{"s3:", "cr3t"}, []string{"missing ']'"}},
		{"a URL the text alone shows", "cannot parse `postgres://h1:5432,h2:5432/db?password=s3cr3t&sslmode=bogus`", "",
			[]string{"s3cr3t"}, []string{"sslmode=bogus"}},
		{"a keyword the text alone shows", "failed: host=h password=s3cr3t dbname=d", "",
			[]string{"s3cr3t"}, []string{"dbname=d"}},
		{"a quoted keyword value", `no database at host=h password='s3 cr3t'`, `host=h password='s3 cr3t'`,
			[]string{"s3", "cr3t"}, []string{"no database at host=h password="}},
		{"nothing to hide", "dial tcp 127.0.0.1:1: connection refused; see http://127.0.0.1:8080/", "fleet.db",
			nil, []string{"dial tcp 127.0.0.1:1: connection refused; see http://127.0.0.1:8080/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Scrub(tc.text, tc.conn)
			for _, s := range tc.secret {
				if strings.Contains(got, s) {
					t.Fatalf("Scrub left %q in %q", s, got)
				}
			}
			for _, k := range tc.keep {
				if !strings.Contains(got, k) {
					t.Fatalf("Scrub lost %q: %q", k, got)
				}
			}
		})
	}
}

var errSentinel = errors.New("sentinel")

func TestScrubError(t *testing.T) {
	const conn = "postgres://u:s3cr3t@h1:1,h2:2/db"
	err := fmt.Errorf("%w: open %s", errSentinel, conn)
	got := ScrubError(err, conn)
	if strings.Contains(got.Error(), "s3cr3t") || !errors.Is(got, errSentinel) {
		t.Fatalf("ScrubError = %v (is sentinel: %v)", got, errors.Is(got, errSentinel))
	}
	if errors.Unwrap(got) != nil {
		t.Fatal("the original text is reachable through Unwrap")
	}
	clean := fmt.Errorf("%w: refused", errSentinel)
	if ScrubError(clean, conn) != clean {
		t.Fatal("an error without a password was wrapped")
	}
	if ScrubError(nil, conn) != nil {
		t.Fatal("nil became an error")
	}
}

// Any input is safe: no panic, and Redact and Scrub agree on the string
// itself.
func FuzzScrub(f *testing.F) {
	for _, s := range []string{"postgres://u:pw@h1,h2/db?password=x&y", "host=h password='a\\'b", "x://:@?&#", "a://b://c:d@e", "password="} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, text, conn string) {
		_ = Scrub(text, conn)
		_ = ScrubError(errors.New(text), conn)
		r := Redact(conn)
		for _, s := range Secrets(conn) {
			if len(s) > len(Mask) && !strings.Contains(r, s) && strings.Contains(Scrub(conn, conn), s) {
				t.Fatalf("Scrub(%q) kept %q", conn, s)
			}
		}
	})
}
