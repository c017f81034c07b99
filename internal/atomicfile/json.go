package atomicfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
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
