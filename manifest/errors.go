package manifest

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is wrapped by every error that reports a bad manifest or config,
// so callers can tell a user's mistake (not worth retrying) from I/O trouble.
var ErrInvalid = errors.New("invalid manifest")

// Error is one problem in a manifest or config, with where it is.
type Error struct {
	File  string // file the problem is in; empty for flags and defaults
	Line  int    // 1-based line, 0 when unknown
	Field string // field path, e.g. spec.files[1].path
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is makes every Error match ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Errors is every problem found, in file and line order.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Is makes Errors match ErrInvalid.
func (es Errors) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the single errors.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// err returns nil for no problems, so callers can `return errs.err()`.
func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

func (es *Errors) add(file string, line int, field, format string, args ...any) {
	*es = append(*es, &Error{File: file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}
