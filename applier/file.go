package applier

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// Field names of a file resource, in the order Resource.Fields holds them.
const (
	FieldContent = "content"
	FieldMode    = "mode"
)

// Content values observed for things at a file's path that are not regular
// files. They never equal a digest, so the planner sees a difference.
const (
	contentSymlink   = "<symlink>"
	contentDirectory = "<directory>"
	contentOther     = "<not a regular file>"
)

const filePrefix = "file"

// FileID returns the resource id of the file at path:
// "file/etc/infer/config.yaml" for "/etc/infer/config.yaml".
func FileID(path string) string { return filePrefix + path }

// FilePath returns the path of the file whose resource id is id, the
// inverse of FileID.
func FilePath(id string) string { return strings.TrimPrefix(id, filePrefix) }

// FileResource returns the resource the planner compares for f: its content
// digest and its mode as four octal digits (manifest.DefaultFileMode when f
// declares none). A mode that does not parse is kept as written; Desired
// reports it as an error.
func FileResource(f manifest.File) planner.Resource {
	r, _ := fileResource(f)
	return r
}

func fileResource(f manifest.File) (planner.Resource, error) {
	r := planner.Resource{ID: FileID(f.Path), Kind: planner.KindFile}
	mode, err := parseMode(f.Mode)
	modeValue := f.Mode
	if err == nil {
		modeValue = formatMode(mode)
	}
	r.Fields = []planner.Field{
		{Name: FieldContent, Value: contentDigest([]byte(f.Content))},
		{Name: FieldMode, Value: modeValue},
	}
	return r, err
}

func contentDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// parseMode reads a mode written in octal ("0644", "755"), the empty string
// being manifest.DefaultFileMode. Only permission, setuid, setgid and sticky
// bits are allowed.
func parseMode(s string) (fs.FileMode, error) {
	if s == "" {
		s = manifest.DefaultFileMode
	}
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o7777 {
		return 0, fmt.Errorf("invalid file mode %q: write it as octal digits like \"0644\"", s)
	}
	m := fs.FileMode(v & 0o777)
	if v&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if v&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if v&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m, nil
}

// formatMode writes the permission, setuid, setgid and sticky bits of m as
// four octal digits.
func formatMode(m fs.FileMode) string {
	v := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return fmt.Sprintf("%04o", v)
}

// checkPath rejects a path that is not absolute and clean.
func checkPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: empty path", ErrInvalidPath)
	case !path.IsAbs(p):
		return fmt.Errorf("%w: %q is not absolute", ErrInvalidPath, p)
	case strings.Contains(p, "\x00"):
		return fmt.Errorf("%w: %q contains a NUL byte", ErrInvalidPath, p)
	case path.Clean(p) != p:
		return fmt.Errorf("%w: %q is not clean (no \"..\", \".\", \"//\" or trailing \"/\"); write it as %q",
			ErrInvalidPath, p, path.Clean(p))
	}
	return nil
}
