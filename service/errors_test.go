package service

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// Sentinel names the sentinel an error is or wraps, and IsSentinel tells
// roster's errors from others.
func TestSentinel(t *testing.T) {
	raw := errors.New("pq: something")
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"nil", nil, nil},
		{"raw", raw, nil},
		{"context", context.Canceled, nil},
		{"wrapped raw", fmt.Errorf("step: %w", raw), nil},
		{"bare", ErrLeaseLost, ErrLeaseLost},
		{"with a detail", fmt.Errorf("%w: lease x", ErrLeaseLost), ErrLeaseLost},
		{"twice wrapped", fmt.Errorf("outer: %w", fmt.Errorf("%w: inner", ErrStorage)), ErrStorage},
		{"with a driver error", fmt.Errorf("%w: the database refused the write: %w", ErrConflict, raw), ErrConflict},
		{"engine's", invalid("Field", "bad"), ErrInvalidInput},
	} {
		got := Sentinel(tc.err)
		if got != tc.want {
			t.Errorf("%s: Sentinel = %v, want %v", tc.name, got, tc.want)
		}
		if IsSentinel(tc.err) != (tc.want != nil) {
			t.Errorf("%s: IsSentinel = %v", tc.name, IsSentinel(tc.err))
		}
	}
	for _, s := range sentinels {
		if Sentinel(fmt.Errorf("%w: detail", s)) != s {
			t.Errorf("%v is not found wrapped", s)
		}
	}
	// Every exported Err variable of errors.go is in the list.
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	must(t, err)
	var exported []string
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") {
						exported = append(exported, n.Name)
					}
				}
			}
		}
	}
	if len(exported) != len(sentinels) {
		t.Errorf("errors.go exports %d errors (%v), the list holds %d", len(exported), exported, len(sentinels))
	}
}

// CheckIdentifier applies the rule every identifier argument follows, and
// names the field.
func TestCheckIdentifier(t *testing.T) {
	for _, tc := range []struct {
		v  string
		ok bool
	}{
		{"ns", true}, {"a.b-c_d:e/f", true}, {strings.Repeat("n", 256), true}, {"ünï", true},
		{"", false}, {strings.Repeat("n", 257), false}, {"a\x01", false}, {"a\nb", false}, {"\xff", false},
	} {
		err := CheckIdentifier("Namespace", tc.v)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%.20q: %v", tc.v, err)
		case !tc.ok && (!errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "Namespace")):
			t.Errorf("%.20q: %v, want ErrInvalidInput naming Namespace", tc.v, err)
		}
	}
}
