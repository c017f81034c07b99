package source

import (
	"errors"
	"fmt"

	"github.com/tend-dev/tend/internal/errkind"
)

// Sentinel errors shared by every source.
var (
	// ErrRefused means a target was fetched and then refused on this node
	// (ErrQuarantined, ErrRewind, ErrUnverified): the source was reached,
	// so the failure is not network trouble and retrying will not help.
	ErrRefused = errors.New("target refused")

	// ErrQuarantined means the target commit was rolled back on this node
	// (a service did not become healthy after it was applied) and is not
	// applied again; a newer commit is.
	ErrQuarantined = errors.New("commit rolled back on this node")

	// ErrRewind means the target commit does not descend from the commit the
	// node last applied, or that cannot be shown: the branch was force-pushed,
	// or the ref now names an older commit. Applying it would roll the node
	// back, so it is refused until source.allowRewind is set or a descendant is
	// pushed; retrying will not help. From a fleet artifact it is also
	// another artifact claiming the applied commit with other content.
	ErrRewind = errors.New("refusing to rewind")

	// ErrUnverified means source.verify is set and the target commit does not
	// carry one signature by a trusted key (OpenPGP in the key ring, SSH in
	// the allowed signers): it is unsigned, signed by another key, signed in
	// a format tend does not verify, its signature does not match, or (with
	// signer validity windows) it is dated before the history it is built
	// on. Retrying will not help until a commit signed by a trusted key is
	// pushed. A key ring that cannot be read is not this error: that is the
	// node's configuration.
	ErrUnverified = errors.New("commit not verified")

	// ErrPathNotFound means the device's folder does not exist at the
	// resolved revision, or holds no *.yaml or *.yml file.
	ErrPathNotFound = errors.New("path not found")

	// ErrSharedPathNotFound means a source path without {device} does not
	// exist at the resolved revision while other paths hold manifests. It
	// is an ErrPathNotFound too.
	ErrSharedPathNotFound = fmt.Errorf("source %w", ErrPathNotFound)
)

// Refuse is a target refused on this node for a reason of kind
// (ErrQuarantined, ErrRewind, ErrUnverified): a message of its own that
// matches ErrRefused and kind with errors.Is, and keeps cause (nil for
// none) in its chain without adding it to the message.
func Refuse(kind, cause error, format string, args ...any) error {
	return errkind.New(errors.Join(ErrRefused, kind, cause), format, args...)
}
