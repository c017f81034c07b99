package applier

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// StateDirMode is the mode of a stateDir tend creates: others may pass
// through it, to the model versions services read (a service may run as
// another user), but not list it. What is private in it is so by its own
// mode: the clone of the fleet repo and service records (0700 folders), the
// inventory and the lock (0600).
const StateDirMode fs.FileMode = 0o711

// WriteFileAtomic replaces dir/name with data and mode the way every state
// file of tend is written: a temp file in dir, fsync, rename, fsync of dir.
// dir is created (mode 0755) when missing; the file mode guards the data.
func WriteFileAtomic(dir, name string, data []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return writeAtomic(root, name, data, mode)
}

// writeJSON writes v, indented, to dir/name with WriteFileAtomic.
func writeJSON(dir, name string, v any, mode fs.FileMode) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(dir, name, append(data, '\n'), mode)
}

// readJSON decodes file into v. A file that does not exist is no error:
// it reports false. A file that does not decode is an error wrapping
// ErrCorruptInventory and naming the file; the caller adds what to do.
func readJSON(file string, v any) (bool, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%w: %s: %v", ErrCorruptInventory, file, err)
	}
	return true, nil
}
