package errkind

import "fmt"

// Error has the message of its cause and matches its kind with
// errors.Is, as well as whatever its cause wraps.
type Error struct {
	kind  error
	cause error
}

func (e *Error) Error() string   { return e.cause.Error() }
func (e *Error) Unwrap() []error { return []error{e.kind, e.cause} }

// New formats a message (%w wraps, as in fmt.Errorf) that matches kind.
func New(kind error, format string, args ...any) error {
	return &Error{kind: kind, cause: fmt.Errorf(format, args...)}
}

// Mark returns err, with its message unchanged, matching kind too; nil
// stays nil.
func Mark(kind, err error) error {
	if err == nil {
		return nil
	}
	return &Error{kind: kind, cause: err}
}
