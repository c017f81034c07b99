package reserve

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFull(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		path string
		full bool
	}{
		{"nil", nil, "", false},
		{"another error", &fs.PathError{Op: "write", Path: "/s/x", Err: syscall.EIO}, "", false},
		{"write, wrapped", fmt.Errorf("write pid to /s/lock: %w", &fs.PathError{Op: "write", Path: "/s/lock", Err: syscall.ENOSPC}), "/s/lock", true},
		{"quota", &fs.PathError{Op: "write", Path: "/s/status.json", Err: syscall.EDQUOT}, "/s/status.json", true},
		{"rename", &os.LinkError{Op: "rename", Old: "/s/.tmp", New: "/s/inventory.json", Err: syscall.ENOSPC}, "/s/inventory.json", true},
		{"no path", fmt.Errorf("sync: %w", syscall.ENOSPC), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, full := Full(tc.err)
			require.Equal(t, tc.full, full)
			require.Equal(t, tc.path, path)
		})
	}
}
