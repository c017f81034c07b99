package statedir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/tend-dev/tend/internal/atomicfile"
)

// Format is the format of stateDir this tend reads and writes. Every JSON
// file tend reads back carries it as "formatVersion" (a decimal string,
// as the inventory always had it), and FormatFile says which format the
// whole stateDir is in, and which tend migrated it there.
//
// Format 1 is what tend wrote before formats were versioned: an
// inventory with formatVersion "1" and every other file without one, the
// collections (quarantine.json, releases.json, models/refused.json,
// services/images.json) bare JSON maps and lists. Format 2 adds
// formatVersion to every file and wraps each collection in an object
// under its key (see collections). A tend reads every format up to its
// own, older ones as they are on disk, and refuses a newer one.
const Format = 2

// FormatFile is the stateDir's format marker (see Marker).
const FormatFile = "format.json"

// formatKey is the field of a file's format version.
const formatKey = "formatVersion"

// collections names, by file name, the files that were bare maps or lists
// in format 1, and the key that holds the collection from format 2 on.
var collections = map[string]string{
	QuarantineFile: "quarantined",
	ReleasesFile:   "releases",
	RefusedFile:    "refused",
	ImagesFile:     "images",
}

// Marker is stateDir's FormatFile: the format of the files in it, and
// the tend (version and commit) that wrote that format there first (by
// creating the stateDir, or by migrating an older one).
type Marker struct {
	FormatVersion string `json:"formatVersion"`
	Tend          string `json:"tend,omitempty"`   // its version, e.g. v0.1.0
	Commit        string `json:"commit,omitempty"` // its commit
}

// Format is the marker of the stateDir's format.
func (d Dir) Format() string { return d.join(FormatFile) }

// FormatCopy is the folder where a migration from format from keeps a
// copy of the files as they were, until the first successful tick.
func (d Dir) FormatCopy(from int) string { return d.join("format-" + strconv.Itoa(from)) }

func (d Dir) formatCopyPartial(from int) string { return d.FormatCopy(from) + ".partial" }

// NewerError is a stateDir, or one file in it, in a format newer than
// this tend reads: a newer tend wrote it. The tend that finds it changes
// nothing.
type NewerError struct {
	Path   string // the file that says so
	Format int    // the format it is in
	Tend   string // the version of the tend that wrote it, when known (from FormatFile)
	Commit string // its commit, when known
}

// release matches a release's version (what a user can install by name).
var release = regexp.MustCompile(`^v\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$`)

func (e *NewerError) Error() string {
	by, install := "a newer tend", "the tend that wrote it"
	switch {
	case release.MatchString(e.Tend):
		by, install = "tend "+e.Tend, "tend "+e.Tend+" or later"
	case e.Tend != "" || e.Commit != "":
		by = "tend " + strings.TrimSpace(e.Tend+" (commit "+e.Commit+")")
		install = fmt.Sprintf("a tend that reads format %d, such as the one that wrote it", e.Format)
	}
	return fmt.Sprintf("%s is in state format %d, written by %s; this tend reads format %d and older: "+
		"install %s on this node (this tend changed nothing)", e.Path, e.Format, by, Format, install)
}

// ErrCorrupt: a state file cannot be read back (atomicfile.ErrCorrupt).
var ErrCorrupt = atomicfile.ErrCorrupt

// ReadMarker returns the stateDir's format and the tend that wrote it. A
// stateDir without a marker is in format 1 (it may be empty or missing: a
// tend has not run on it yet).
func (d Dir) ReadMarker() (int, Marker, error) {
	var m Marker
	data, err := os.ReadFile(d.Format())
	if errors.Is(err, fs.ErrNotExist) {
		return 1, m, nil
	}
	if err != nil {
		return 0, m, fmt.Errorf("read the state format: %w", err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return 0, m, fmt.Errorf("%w: %s: %v; it says which format the files in %s are in: "+
			"restore it, or write {\"formatVersion\": \"%d\"} if this tend wrote them", ErrCorrupt, d.Format(), err, string(d), Format)
	}
	n, err := strconv.Atoi(m.FormatVersion)
	if err != nil || n < 1 {
		return 0, m, fmt.Errorf("%w: %s: formatVersion %q is no format", ErrCorrupt, d.Format(), m.FormatVersion)
	}
	return n, m, nil
}

// Check returns a *NewerError when the stateDir is in a format newer than
// this tend's, and nil when this tend can read it (an older format is
// read as it is; Migrate rewrites it). It reads one small file and writes
// nothing: a tend calls it before it touches the stateDir.
func (d Dir) Check() error {
	n, m, err := d.ReadMarker()
	if err != nil {
		return err
	}
	if n > Format {
		return &NewerError{Path: d.Format(), Format: n, Tend: m.Tend, Commit: m.Commit}
	}
	return nil
}

// Encode returns v as the file called name holds it in this tend's
// format: indented JSON with formatVersion first (a collection wrapped in
// an object under its key), strings as they are (no \u003c for "<": the
// files are read by people too).
func Encode(name string, v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	data, err := current(name, bytes.TrimSpace(b.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", name, err)
	}
	return indent(data)
}

// current returns data, the JSON of a value of the file called name as
// this tend's code has it, in this tend's format: a collection wrapped
// under its key, anything else an object with formatVersion first.
func current(name string, data []byte) ([]byte, error) {
	if key, ok := collections[name]; ok {
		var b bytes.Buffer
		fmt.Fprintf(&b, `{%q:"%d",%q:`, formatKey, Format, key)
		b.Write(data)
		b.WriteByte('}')
		return b.Bytes(), nil
	}
	return setFormat(data, Format)
}

func indent(data []byte) ([]byte, error) {
	var out bytes.Buffer
	if err := json.Indent(&out, data, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// Decode reads data, the content of file, into v: a file in this tend's
// format or an older one. A file in a newer format is a *NewerError; one
// that does not decode an error wrapping ErrCorrupt that names the file.
func Decode(file string, data []byte, v any) error {
	name := filepath.Base(file)
	n, err := formatOf(name, data)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, file, err)
	}
	if n > Format {
		return &NewerError{Path: file, Format: n}
	}
	if n < Format {
		// An older format is read as it would be once migrated.
		var compact bytes.Buffer
		if err := json.Compact(&compact, data); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, file, err)
		}
		if data, err = upgrade(name, compact.Bytes(), n); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, file, err)
		}
	}
	if key, ok := collections[name]; ok {
		var wrap map[string]json.RawMessage
		if err := json.Unmarshal(data, &wrap); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, file, err)
		}
		data = wrap[key]
		if data == nil {
			return nil // an empty collection
		}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, file, err)
	}
	return nil
}

// ReadJSON decodes file into v with Decode. A file that does not exist is
// no error: it reports false.
func ReadJSON(file string, v any) (bool, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := Decode(file, data, v); err != nil {
		return false, err
	}
	return true, nil
}

// WriteJSON writes v, encoded with Encode, to dir/name with
// atomicfile.Write.
func WriteJSON(dir, name string, v any, mode fs.FileMode) error {
	data, err := Encode(name, v)
	if err != nil {
		return err
	}
	return atomicfile.Write(dir, name, data, mode)
}

// formatOf returns the format a file called name holding data is in.
func formatOf(name string, data []byte) (int, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		if _, ok := collections[name]; ok {
			return 1, nil // a bare list
		}
		return 0, errors.New("a list where an object belongs")
	}
	var head struct {
		V json.RawMessage `json:"formatVersion"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return 0, err
	}
	if head.V == nil {
		return 1, nil
	}
	var s string
	if err := json.Unmarshal(head.V, &s); err != nil {
		return 0, fmt.Errorf("formatVersion %s is not a string", head.V)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("formatVersion %q is no format", s)
	}
	return n, nil
}

// upgrade returns data, a file called name in format from, in this tend's
// format, compact. Each step is one format to the next; a file already in
// this format comes back as it is.
func upgrade(name string, data []byte, from int) ([]byte, error) {
	for n := from; n < Format; n++ {
		var err error
		if data, err = steps[n](name, data); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// steps[n] rewrites a file from format n to format n+1.
var steps = map[int]func(name string, data []byte) ([]byte, error){
	1: func(name string, data []byte) ([]byte, error) {
		if key, ok := collections[name]; ok {
			var b bytes.Buffer
			fmt.Fprintf(&b, `{%q:"2",%q:`, formatKey, key)
			b.Write(data)
			b.WriteByte('}')
			return b.Bytes(), nil
		}
		return setFormat(data, 2)
	},
}

// setFormat returns the JSON object data with formatVersion n as its
// first member, its other members kept in their order.
func setFormat(data []byte, n int) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{%q:"%d"`, formatKey, n)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if key == formatKey {
			continue
		}
		b.WriteByte(',')
		if err := writeString(&b, key); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		b.Write(v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeString writes s as a JSON string, as Encode writes strings.
func writeString(b *bytes.Buffer, s string) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // the newline Encode adds
	return nil
}
