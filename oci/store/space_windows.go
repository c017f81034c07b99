package store

import (
	"fmt"

	"golang.org/x/sys/windows"
)

// FreeBytes is what dir's volume has free for the calling user.
func FreeBytes(dir string) (int64, error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, fmt.Errorf("free space on %s: %w", dir, err)
	}
	var avail uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, nil, nil); err != nil {
		return 0, fmt.Errorf("free space on %s: %w", dir, err)
	}
	return int64(avail), nil
}
