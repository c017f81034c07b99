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
	b, err := encodeJSON(v)
	if err != nil {
		return err
	}
	return write(dir, name, b, mode, true)
}

// WriteJSONNoDirSync is WriteJSON without the fsync of the folder after
// the rename, for a report that is written again and again and that
// nothing reads back as state (the status document): the file is still
// whole before it takes the name, and a power cut right after may only
// undo the rename, leaving the report before it, whole too. It saves a
// journal commit per write.
func WriteJSONNoDirSync(dir, name string, v any, mode fs.FileMode) error {
	b, err := encodeJSON(v)
	if err != nil {
		return err
	}
	return write(dir, name, b, mode, false)
}

func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
