package gitsource

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"syscall"
	"testing"
)

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{"dns", &net.DNSError{Err: "no such host", Name: "git.example.com"}, true},
		{"deadline", context.DeadlineExceeded, true},
		{"full disk", &fs.PathError{Op: "write", Path: "/var/lib/tend/git/objects/pack/tmp_pack_1", Err: syscall.ENOSPC}, false},
		{"read-only", &fs.PathError{Op: "open", Path: "/x", Err: syscall.EROFS}, false},
		{"cancelled", context.Canceled, false},
		{"ref not found", ErrRefNotFound, false},
		{"other", errors.New("something odd"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := transient(tc.err); got != tc.want {
				t.Fatalf("transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
