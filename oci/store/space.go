package store

import (
	"errors"
	"fmt"

	"github.com/tend-dev/tend/internal/printable"
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
		return fmt.Errorf("%w: %s needs %s, %s free on %s", ErrNoSpace, what, printable.HumanBytes(need), printable.HumanBytes(free), dir)
	}
	return nil
}
