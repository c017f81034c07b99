package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
)

// ModelLink is the node path of model name's stable path, the symlink to
// its active version that ${model:NAME} expands to: the declared path
// under root, or stateDir/models/NAME/current.
func ModelLink(root, stateDir, name, declared string) string {
	if declared == "" {
		return statedir.Dir(stateDir).Models().Link(name)
	}
	return filepath.Join(root, declared)
}

// ContentDigest is the digest plans compare for a file's content.
func ContentDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ParseMode reads a mode written in octal ("0644", "755"), the empty
// string being manifest.DefaultFileMode. Only permission, setuid, setgid
// and sticky bits are allowed.
func ParseMode(s string) (fs.FileMode, error) {
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

// FormatMode writes the permission, setuid, setgid and sticky bits of m as
// four octal digits, the value plans compare.
func FormatMode(m fs.FileMode) string {
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
