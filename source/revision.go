package source

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Revision names one commit of the fleet repo and the ref it was read from:
// REF@sha1:COMMIT, as Flux names a Git revision. Plans, status, metrics,
// the inventory and the revision annotation of a fleet artifact all print
// it in that form.
type Revision struct {
	Ref    string // branch, tag or the ref asked for; "" is the remote's default branch, shown as HEAD
	Commit string // full SHA-1 hash, lower case
}

// sha1Sep separates the ref from the commit.
const sha1Sep = "@sha1:"

// MaxRefBytes bounds a revision's ref: a revision comes from a server or an
// artifact's annotation, and is logged every tick and used as a metric
// label.
const MaxRefBytes = 255

// Quote quotes s for a message, cut to its first 64 bytes when longer: a
// revision or ref from a server is never printed whole or raw.
func Quote(s string) string {
	if len(s) <= 64 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:64], len(s))
}

// checkRef refuses a ref that no Git ref can be (git check-ref-format):
// too long, control characters, spaces, ~^:?*[\ or "..". It refuses too
// what Git would take but a terminal acts on or a reader is misled by:
// bytes that are not UTF-8, C1 controls (U+0080 to U+009F, such as CSI)
// and format characters (U+202E and the other bidirectional overrides,
// zero-width spaces), since plans, logs and status print the ref.
func checkRef(ref string) error {
	if len(ref) > MaxRefBytes {
		return fmt.Errorf("its ref is %d bytes, more than %d", len(ref), MaxRefBytes)
	}
	if !utf8.ValidString(ref) {
		return errors.New("its ref holds bytes that are not UTF-8")
	}
	for _, c := range ref {
		if c < 0x20 || c == 0x7f || strings.ContainsRune(" ~^:?*[\\", c) {
			return fmt.Errorf("its ref holds %q, which no Git ref may", c)
		}
		if unicode.IsControl(c) || unicode.Is(unicode.Cf, c) {
			return fmt.Errorf("its ref holds %U, a control or format character, which tend does not print", c)
		}
	}
	if strings.Contains(ref, "..") {
		return fmt.Errorf("its ref holds \"..\", which no Git ref may")
	}
	return nil
}

// ParseRevision reads a revision: REF@sha1:COMMIT (as String writes it,
// tend publish and flux push artifact), sha1:COMMIT (no ref), or REF/COMMIT
// and a bare COMMIT (older Flux). COMMIT must be a full SHA-1 hash; it is
// returned in lower case. The ref may be "".
func ParseRevision(s string) (Revision, error) {
	var r Revision
	switch {
	case strings.Contains(s, sha1Sep):
		r.Ref, r.Commit, _ = strings.Cut(s, sha1Sep)
	case strings.HasPrefix(s, "sha1:"):
		r.Commit = strings.TrimPrefix(s, "sha1:")
	case strings.Contains(s, "/"):
		i := strings.LastIndexByte(s, '/')
		r.Ref, r.Commit = s[:i], s[i+1:]
	default:
		r.Commit = s
	}
	r.Commit = strings.ToLower(r.Commit)
	if !IsCommit(r.Commit) {
		return Revision{}, fmt.Errorf("revision %s names no Git commit: want REF@sha1:COMMIT, COMMIT a full SHA-1 hash", Quote(s))
	}
	if err := checkRef(r.Ref); err != nil {
		return Revision{}, fmt.Errorf("revision %s names no Git ref: %w", Quote(s), err)
	}
	return r, nil
}

// String formats the revision as REF@sha1:COMMIT, an empty ref as HEAD.
func (r Revision) String() string { return r.DisplayRef() + sha1Sep + r.Commit }

// DisplayRef is the ref as messages name it: HEAD for "".
func (r Revision) DisplayRef() string {
	if r.Ref == "" {
		return "HEAD"
	}
	return r.Ref
}

// Short is the commit's first 12 hex digits, as messages name a commit.
func (r Revision) Short() string { return ShortCommit(r.Commit) }

// IsZero reports whether r names nothing: no revision applied yet.
func (r Revision) IsZero() bool { return r == Revision{} }

// SameCommit reports whether r and o name the same commit, whatever their
// refs.
func (r Revision) SameCommit(o Revision) bool {
	return r.Commit != "" && strings.EqualFold(r.Commit, o.Commit)
}

// SameRef reports whether r and o were read from the same ref:
// refs/heads/main and main alike, "" and HEAD alike.
func (r Revision) SameRef(o Revision) bool {
	return shortRef(r.DisplayRef()) == shortRef(o.DisplayRef())
}

// shortRef names refs/heads/main and main alike.
func shortRef(ref string) string {
	for _, p := range []string{"refs/heads/", "refs/tags/"} {
		ref = strings.TrimPrefix(ref, p)
	}
	return ref
}

// ShortCommit is a commit's first 12 characters, as messages name it.
func ShortCommit(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// IsCommit reports whether s is a full SHA-1 hash in lower case.
func IsCommit(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
