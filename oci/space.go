package oci

import (
	"errors"
	"fmt"
)

// ErrNoSpace means a model does not fit on the disk; nothing was
// downloaded.
var ErrNoSpace = errors.New("not enough disk space")

// CheckSpace fails when need bytes do not fit in what dir's file system has
// free (for an unprivileged user), naming what needs them: checked before
// any download, so a model that cannot fit changes nothing.
func CheckSpace(dir, what string, need int64) error {
	free, err := FreeBytes(dir)
	if err != nil {
		return err
	}
	if need > free {
		return fmt.Errorf("%w: %s needs %s, %s free on %s", ErrNoSpace, what, HumanBytes(need), HumanBytes(free), dir)
	}
	return nil
}

// HumanBytes prints a size as people read disk sizes: 4.1 GB, 512.0 MB.
func HumanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
