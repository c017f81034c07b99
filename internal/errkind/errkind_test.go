package errkind

import (
	"errors"
	"io/fs"
	"testing"
)

var errKind = errors.New("kind")

func TestNew(t *testing.T) {
	err := New(errKind, "open %s: %w", "a.yaml", fs.ErrNotExist)
	if err.Error() != "open a.yaml: file does not exist" {
		t.Errorf("message %q: the kind's text must not be added", err)
	}
	if !errors.Is(err, errKind) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%v matches neither its kind nor what it wraps", err)
	}
	if errors.Is(New(errKind, "plain"), fs.ErrNotExist) {
		t.Error("an error without %w matches what it does not wrap")
	}
}

func TestMark(t *testing.T) {
	if Mark(errKind, nil) != nil {
		t.Fatal("Mark of nil is not nil")
	}
	base := errors.New("connection refused")
	err := Mark(errKind, base)
	if err.Error() != base.Error() || !errors.Is(err, errKind) || !errors.Is(err, base) {
		t.Errorf("Mark(%v) = %v: message changed or a match lost", base, err)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Error("errors.As does not find *Error")
	}
}
