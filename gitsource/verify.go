package gitsource

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/tend-dev/tend/source"
)

// Armor header lines of the signatures git writes in a commit's gpgsig.
const (
	pgpSignatureStart  = "-----BEGIN PGP SIGNATURE-----"
	sshSignatureStart  = "-----BEGIN SSH SIGNATURE-----"
	x509SignatureStart = "-----BEGIN SIGNED MESSAGE-----"
	armorStart         = "-----BEGIN "
)

// Trust names the signers a target commit must be signed by: the
// armored OpenPGP public keys of a key ring file, and the SSH signers of
// an allowed signers file (git's gpg.ssh.allowedSignersFile). Both are
// read afresh at every check; with neither, nothing is checked.
type Trust struct {
	Keyring        string
	AllowedSigners string
}

func (t Trust) empty() bool { return t.Keyring == "" && t.AllowedSigners == "" }

// verifyCommit checks commit's signature against t: an OpenPGP signature
// against the key ring, an SSH one against the allowed signers. Only the
// target commit is checked: its tree is what is applied, and its signer
// vouches for it whoever wrote the commits before it. timed reports that
// the signature was accepted at the commit's committer time, which its
// author sets: an SSH signature checked against signers with validity
// windows (see checkCommitTime, which bounds that time).
func verifyCommit(commit *object.Commit, t Trust, shown string) (timed bool, err error) {
	if t.empty() {
		return false, nil
	}
	rev := commit.Hash.String()[:12]
	sig := commit.PGPSignature
	accepted := "an OpenPGP signature by a key of " + t.Keyring
	switch {
	case t.Keyring == "":
		accepted = "an SSH signature by a signer of " + t.AllowedSigners
	case t.AllowedSigners != "":
		accepted += ", or an SSH signature by a signer of " + t.AllowedSigners
	}
	switch {
	case sig == "":
		return false, source.Refuse(source.ErrUnverified, nil, "commit %s of %s is not signed; source.verify requires %s", rev, shown, accepted)
	case strings.HasPrefix(sig, sshSignatureStart) && t.AllowedSigners == "":
		return false, source.Refuse(source.ErrUnverified, nil, "commit %s of %s has an SSH signature, and source.verify lists no SSH signers; set source.verify.ssh.allowedSigners, or sign with OpenPGP", rev, shown)
	case strings.HasPrefix(sig, sshSignatureStart):
		if len(armoredBlocks([]byte(sig))) > 1 {
			return false, source.Refuse(source.ErrUnverified, nil, "commit %s of %s carries more than one signature; source.verify accepts exactly one", rev, shown)
		}
		return verifySSH(commit, sig, t.AllowedSigners, rev, shown)
	case strings.HasPrefix(sig, x509SignatureStart):
		return false, source.Refuse(source.ErrUnverified, nil, "commit %s of %s has an X.509 signature: X.509 commit signatures are not supported; source.verify requires %s", rev, shown, accepted)
	case !strings.HasPrefix(sig, pgpSignatureStart):
		return false, source.Refuse(source.ErrUnverified, nil, "commit %s of %s has a signature tend cannot read; source.verify requires %s", rev, shown, accepted)
	case t.Keyring == "":
		return false, source.Refuse(source.ErrUnverified, nil, "commit %s of %s has an OpenPGP signature, and source.verify has no key ring; set source.verify.keyring, or sign with SSH (gpg.format=ssh)", rev, shown)
	case len(armoredBlocks([]byte(sig))) > 1:
		// As git itself, which refuses a second signature status line.
		return false, source.Refuse(source.ErrUnverified, nil, "commit %s of %s carries more than one signature; source.verify accepts exactly one", rev, shown)
	}
	ring, err := readKeyring(t.Keyring)
	if err != nil {
		return false, err
	}
	keyring := t.Keyring

	body, issuer, err := parseSignature(sig)
	if err != nil {
		return false, source.Refuse(source.ErrUnverified, err, "commit %s of %s has an unreadable OpenPGP signature: %v", rev, shown, err)
	}
	signed := &plumbing.MemoryObject{}
	if err := commit.EncodeWithoutSignature(signed); err != nil {
		return false, fmt.Errorf("encode commit %s of %s: %w", rev, shown, err)
	}
	r, err := signed.Reader()
	if err != nil {
		return false, fmt.Errorf("encode commit %s of %s: %w", rev, shown, err)
	}
	defer r.Close()
	_, err = openpgp.CheckDetachedSignature(ring, r, bytes.NewReader(body), nil)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, pgperrors.ErrUnknownIssuer):
		return false, source.Refuse(source.ErrUnverified, err, "commit %s of %s is signed by key %s, which is not in the key ring %s; add its public key there or sign with a trusted key",
			rev, shown, issuer, keyring)
	default:
		return false, source.Refuse(source.ErrUnverified, err, "commit %s of %s: the signature by key %s does not verify against the key ring %s: %v",
			rev, shown, issuer, keyring, err)
	}
}

// readKeyring reads every armored public key block in the file at path:
// one block with several keys (gpg --export --armor A B) or several blocks
// one after the other (cat a.asc b.asc).
func readKeyring(path string) (openpgp.EntityList, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key ring %s (source.verify.keyring): %w", path, err)
	}
	var ring openpgp.EntityList
	for i, b := range armoredBlocks(data) {
		block, err := armor.Decode(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("read key ring %s: armored block %d: %w", path, i+1, err)
		}
		if block.Type != openpgp.PublicKeyType {
			return nil, fmt.Errorf("read key ring %s: armored block %d is a %s, not a %s; put only public keys there (gpg --export --armor KEYID)",
				path, i+1, block.Type, openpgp.PublicKeyType)
		}
		keys, err := openpgp.ReadKeyRing(block.Body)
		if err != nil {
			return nil, fmt.Errorf("read key ring %s: armored block %d: %w", path, i+1, err)
		}
		ring = append(ring, keys...)
	}
	if len(ring) == 0 {
		return nil, fmt.Errorf("read key ring %s: no OpenPGP public key found; it must hold armored public keys (gpg --export --armor KEYID)", path)
	}
	return ring, nil
}

// armoredBlocks splits data at every line that starts an armored block.
// armor.Decode reads ahead, so each block is decoded from its own slice.
func armoredBlocks(data []byte) [][]byte {
	var starts []int
	for off := 0; off < len(data); {
		line := data[off:]
		if bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte(armorStart)) {
			starts = append(starts, off)
		}
		i := bytes.IndexByte(line, '\n')
		if i < 0 {
			break
		}
		off += i + 1
	}
	blocks := make([][]byte, len(starts))
	for i, s := range starts {
		end := len(data)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		blocks[i] = data[s:end]
	}
	return blocks
}

// parseSignature returns the binary signature packet inside the armored
// sig and names the key that made it, for messages.
func parseSignature(sig string) (body []byte, issuer string, err error) {
	block, err := armor.Decode(strings.NewReader(sig))
	if err != nil {
		return nil, "", err
	}
	if block.Type != openpgp.SignatureType {
		return nil, "", fmt.Errorf("armored block is a %s, not a %s", block.Type, openpgp.SignatureType)
	}
	if body, err = io.ReadAll(block.Body); err != nil {
		return nil, "", err
	}
	p, err := packet.Read(bytes.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	s, ok := p.(*packet.Signature)
	if !ok {
		return nil, "", fmt.Errorf("found a %T packet, not a signature", p)
	}
	switch {
	case s.IssuerKeyId != nil && len(s.IssuerFingerprint) > 0:
		issuer = fmt.Sprintf("%016X (fingerprint %X)", *s.IssuerKeyId, s.IssuerFingerprint)
	case s.IssuerKeyId != nil:
		issuer = fmt.Sprintf("%016X", *s.IssuerKeyId)
	case len(s.IssuerFingerprint) > 0:
		issuer = fmt.Sprintf("with fingerprint %X", s.IssuerFingerprint)
	default:
		return nil, "", errors.New("the signature does not name the key that made it")
	}
	return body, issuer, nil
}
