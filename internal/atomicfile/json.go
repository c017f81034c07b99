package atomicfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrCorrupt: a state file cannot be read back. The caller says what to do
// about it, since that depends on the file.
var ErrCorrupt = errors.New("corrupt state file")

// WriteJSON writes v, indented, to dir/name with Write. Strings are
// written as they are (no \u003c for "<"): the files are read by people
// too, and tend status prints one.
func WriteJSON(dir, name string, v any, mode fs.FileMode) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	return Write(dir, name, b.Bytes(), mode)
}

// ReadJSON decodes file into v. A file that does not exist is no error: it
// reports false. A file that does not decode is an error wrapping ErrCorrupt
// and naming the file.
func ReadJSON(file string, v any) (bool, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%w: %s: %v", ErrCorrupt, file, err)
	}
	return true, nil
}
