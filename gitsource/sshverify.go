package gitsource

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"

	"github.com/tend-dev/tend/source"
)

// sshNamespace is the namespace git signs commits in (ssh-keygen -Y sign
// -n git).
const sshNamespace = "git"

// maxAllowedSigners bounds the allowed signers file tend reads.
const maxAllowedSigners = 1 << 20

// allowedSigner is one line of an allowed signers file, as ssh-keygen(1)
// reads it (ALLOWED SIGNERS): principals, options, a public key.
type allowedSigner struct {
	line        int
	principals  []string // patterns: * and ?, a leading ! refuses
	key         ssh.PublicKey
	ca          bool     // cert-authority: the key signs the signers' certificates
	namespaces  []string // patterns; none means any
	validAfter  time.Time
	validBefore time.Time
}

// readAllowedSigners reads the allowed signers file at path, the format of
// git's gpg.ssh.allowedSignersFile: a line is "PRINCIPALS [OPTIONS]
// KEYTYPE BASE64KEY [COMMENT]", options among cert-authority,
// namespaces="…", valid-after="…" and valid-before="…"; # starts a comment.
func readAllowedSigners(path string) ([]allowedSigner, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read allowed signers %s (source.verify.ssh.allowedSigners): %w", path, err)
	}
	if len(data) > maxAllowedSigners {
		return nil, fmt.Errorf("allowed signers %s: %d bytes; tend reads at most %d", path, len(data), maxAllowedSigners)
	}
	var out []allowedSigner
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), maxAllowedSigners)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseAllowedSigner(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w; a line is PRINCIPALS [OPTIONS] KEYTYPE KEY, as in git's gpg.ssh.allowedSignersFile (see ssh-keygen(1), ALLOWED SIGNERS)", path, n, err)
		}
		s.line = n
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read allowed signers %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("allowed signers %s lists no signer; add a line such as: alice@example.com namespaces=\"git\" ssh-ed25519 AAAA…", path)
	}
	return out, nil
}

func parseAllowedSigner(line string) (allowedSigner, error) {
	var s allowedSigner
	principals, rest, err := firstField(line)
	if err != nil {
		return s, err
	}
	s.principals = strings.Split(principals, ",")
	// The rest is an authorized_keys line: [OPTIONS] KEYTYPE KEY [COMMENT].
	key, _, options, _, err := ssh.ParseAuthorizedKey([]byte(rest))
	if err != nil {
		return s, fmt.Errorf("no public key after the principals: %w", err)
	}
	s.key = key
	for _, o := range options {
		name, value, hasValue := strings.Cut(o, "=")
		value = strings.Trim(value, `"`)
		switch strings.ToLower(name) {
		case "cert-authority":
			s.ca = true
		case "namespaces":
			s.namespaces = strings.Split(value, ",")
		case "valid-after":
			if s.validAfter, err = parseSSHTime(value); err != nil || !hasValue {
				return s, fmt.Errorf("valid-after=%q: want YYYYMMDD[HHMM[SS]][Z]", value)
			}
		case "valid-before":
			if s.validBefore, err = parseSSHTime(value); err != nil || !hasValue {
				return s, fmt.Errorf("valid-before=%q: want YYYYMMDD[HHMM[SS]][Z]", value)
			}
		default:
			return s, fmt.Errorf("unknown option %q", name)
		}
	}
	return s, nil
}

// firstField splits off the principals, which may be double-quoted.
func firstField(line string) (field, rest string, err error) {
	if strings.HasPrefix(line, `"`) {
		end := strings.IndexByte(line[1:], '"')
		if end < 0 {
			return "", "", errors.New("unterminated quote in the principals")
		}
		return line[1 : end+1], strings.TrimSpace(line[end+2:]), nil
	}
	i := strings.IndexAny(line, " \t")
	if i < 0 {
		return "", "", errors.New("a principal alone, with no key")
	}
	return line[:i], strings.TrimSpace(line[i:]), nil
}

// parseSSHTime reads ssh-keygen's YYYYMMDD[HHMM[SS]] time, UTC with a Z
// suffix, else local time.
func parseSSHTime(v string) (time.Time, error) {
	loc := time.Local
	if s, ok := strings.CutSuffix(v, "Z"); ok {
		v, loc = s, time.UTC
	}
	layouts := map[int]string{8: "20060102", 12: "200601021504", 14: "20060102150405"}
	layout, ok := layouts[len(v)]
	if !ok {
		return time.Time{}, errors.New("bad length")
	}
	return time.ParseInLocation(layout, v, loc)
}

// matchPatterns matches s against ssh's pattern list: * and ? wildcards,
// and a pattern starting with ! that matches refuses s whatever else does.
func matchPatterns(patterns []string, s string) bool {
	ok := false
	for _, p := range patterns {
		if neg, found := strings.CutPrefix(p, "!"); found {
			if wildcard(neg, s) {
				return false
			}
			continue
		}
		ok = ok || wildcard(p, s)
	}
	return ok
}

// wildcard matches s against p, where * is any run and ? any one byte.
func wildcard(p, s string) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for i := len(s); i >= 0; i-- {
				if wildcard(p[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
		default:
			if s == "" || s[0] != p[0] {
				return false
			}
		}
		p, s = p[1:], s[1:]
	}
	return s == ""
}

// windowed reports whether the line limits when its signer signs: with
// valid-after or valid-before, or as a cert-authority, whose
// certificates are valid from one time to another.
func (s allowedSigner) windowed() bool {
	return s.ca || !s.validAfter.IsZero() || !s.validBefore.IsZero()
}

// signs reports whether the signer vouches for key at time when in git's
// namespace, and if not, why not ("" when the line is not about key).
func (s allowedSigner) signs(key ssh.PublicKey, when time.Time) (ok bool, why string) {
	fp := ssh.FingerprintSHA256
	if s.ca {
		cert, isCert := key.(*ssh.Certificate)
		if !isCert || fp(cert.SignatureKey) != fp(s.key) {
			return false, ""
		}
		if cert.CertType != ssh.UserCert {
			return false, fmt.Sprintf("line %d: the certificate is not a user certificate", s.line)
		}
		principal := ""
		for _, p := range cert.ValidPrincipals {
			if principal == "" && matchPatterns(s.principals, p) {
				principal = p
			}
		}
		if principal == "" {
			return false, fmt.Sprintf("line %d: no principal of the certificate (%s) matches %s", s.line, strings.Join(cert.ValidPrincipals, ", "), strings.Join(s.principals, ","))
		}
		unix := uint64(when.Unix())
		if unix < cert.ValidAfter || cert.ValidBefore != ssh.CertTimeInfinity && unix >= cert.ValidBefore {
			return false, fmt.Sprintf("line %d: the certificate is not valid at the commit's time %s", s.line, when.UTC().Format(time.RFC3339))
		}
		// The certificate names the CA; only its signature says the CA
		// issued it.
		checker := ssh.CertChecker{Clock: func() time.Time { return when }}
		if err := checker.CheckCert(principal, cert); err != nil {
			return false, fmt.Sprintf("line %d: the certificate does not check against its authority %s: %v", s.line, fp(s.key), err)
		}
	} else if fp(key) != fp(s.key) {
		return false, ""
	}
	if len(s.namespaces) > 0 && !matchPatterns(s.namespaces, sshNamespace) {
		return false, fmt.Sprintf("line %d: the signer is allowed namespaces %s, not %s", s.line, strings.Join(s.namespaces, ","), sshNamespace)
	}
	if !s.validAfter.IsZero() && when.Before(s.validAfter) {
		return false, fmt.Sprintf("line %d: the signer is valid after %s, and the commit was made at %s", s.line, s.validAfter.Format(time.RFC3339), when.Format(time.RFC3339))
	}
	if !s.validBefore.IsZero() && !when.Before(s.validBefore) {
		return false, fmt.Sprintf("line %d: the signer is valid before %s, and the commit was made at %s", s.line, s.validBefore.Format(time.RFC3339), when.Format(time.RFC3339))
	}
	return true, ""
}

// verifySSH checks commit's SSH signature (sig) against the allowed
// signers file, as git verify-commit with gpg.format=ssh does: the
// signature's key is listed for namespace git and valid at the commit's
// committer time, and it signed the commit. timed reports that the
// file has validity windows (valid-after, valid-before, or a
// cert-authority, whose certificates carry theirs): the commit's time
// decided, and checkCommitTime must bound it.
func verifySSH(commit *object.Commit, sig, file, rev, shown string) (timed bool, err error) {
	signers, err := readAllowedSigners(file)
	if err != nil {
		return false, err
	}
	for _, a := range signers {
		timed = timed || a.windowed()
	}
	s, err := sshsig.Unarmor([]byte(sig))
	if err != nil {
		return false, source.Refuse(source.ErrUnverified, err, "commit %s of %s has an unreadable SSH signature: %v", rev, shown, err)
	}
	if s.Namespace != sshNamespace {
		return false, source.Refuse(source.ErrUnverified, nil, "commit %s of %s has an SSH signature for namespace %q, not %q: sign commits with git (gpg.format=ssh)", rev, shown, s.Namespace, sshNamespace)
	}
	key := s.PublicKey
	signer := ssh.FingerprintSHA256(key)
	if c, ok := key.(*ssh.Certificate); ok {
		signer = fmt.Sprintf("certificate %q (key %s) issued by %s", c.KeyId, ssh.FingerprintSHA256(c.Key), ssh.FingerprintSHA256(c.SignatureKey))
	}
	when := commit.Committer.When
	var whys []string
	for _, a := range signers {
		ok, why := a.signs(key, when)
		if why != "" {
			whys = append(whys, why)
		}
		if !ok {
			continue
		}
		msg, err := unsigned(commit, rev, shown)
		if err != nil {
			return false, err
		}
		if err := sshsig.Verify(bytes.NewReader(msg), s, key, s.HashAlgorithm, sshNamespace); err != nil {
			return false, source.Refuse(source.ErrUnverified, err, "commit %s of %s: the SSH signature by %s does not verify: %v", rev, shown, signer, err)
		}
		return timed, nil
	}
	if len(whys) > 0 {
		return false, source.Refuse(source.ErrUnverified, nil, "commit %s of %s is signed by SSH %s, which %s does not allow for it: %s",
			rev, shown, signer, file, strings.Join(whys, "; "))
	}
	return false, source.Refuse(source.ErrUnverified, nil, "commit %s of %s is signed by SSH key %s, which %s does not list; add a line PRINCIPAL namespaces=\"git\" %s, or sign with a listed key",
		rev, shown, signer, file, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(keyOf(key)))))
}

// keyOf is the key a certificate certifies, or key.
func keyOf(key ssh.PublicKey) ssh.PublicKey {
	if c, ok := key.(*ssh.Certificate); ok {
		return c.Key
	}
	return key
}

// unsigned returns commit as it was signed: encoded without its signature.
func unsigned(commit *object.Commit, rev, shown string) ([]byte, error) {
	o := &plumbing.MemoryObject{}
	if err := commit.EncodeWithoutSignature(o); err != nil {
		return nil, fmt.Errorf("encode commit %s of %s: %w", rev, shown, err)
	}
	r, err := o.Reader()
	if err != nil {
		return nil, fmt.Errorf("encode commit %s of %s: %w", rev, shown, err)
	}
	defer r.Close()
	return io.ReadAll(r)
}
