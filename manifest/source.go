package manifest

import (
	"fmt"
	"strings"
)

// SourceConfig says where the fleet repo is and what of it this device reads.
type SourceConfig struct {
	URL string `json:"url"`
	Ref string `json:"ref,omitempty"`
	// Path is the one folder of the repo this device reads: the shorthand
	// of paths with one entry. It may contain {device} and {label:KEY}.
	Path string `json:"path,omitempty"`
	// Paths are the folders of the repo this device reads, every
	// document under each; each may contain {device} and {label:KEY}.
	// At most one of path and paths is set.
	Paths  []string `json:"paths,omitempty"`
	Auth   *Auth    `json:"auth,omitempty"`
	Verify *Verify  `json:"verify,omitempty"`
	// AllowRewind accepts a target commit that does not descend from the
	// last applied one (a force-push, or an older commit replayed).
	AllowRewind bool     `json:"allowRewind,omitempty"`
	Timeout     Duration `json:"timeout,omitempty"`
}

// Auth holds references to credential files; never the credentials.
type Auth struct {
	TokenFile             string `json:"tokenFile,omitempty"`
	UsernameFile          string `json:"usernameFile,omitempty"`
	PasswordFile          string `json:"passwordFile,omitempty"`
	CAFile                string `json:"caFile,omitempty"`
	SSHKeyFile            string `json:"sshKeyFile,omitempty"`
	KnownHostsFile        string `json:"knownHostsFile,omitempty"`
	InsecureIgnoreHostKey bool   `json:"insecureIgnoreHostKey,omitempty"`
}

// Verify configures the source's signature verification. Of a Git
// source, a target commit must carry an OpenPGP signature by a key of
// Keyring or an SSH signature by a signer SSH allows (at least one of the
// two is set). Of an oci:// source, the fleet artifact must carry the
// signatures Cosign and Notation ask for, as a model's (ArtifactVerify).
type Verify struct {
	Keyring  string          `json:"keyring,omitempty"`
	SSH      *SSHVerify      `json:"ssh,omitempty"`
	Cosign   *CosignVerify   `json:"cosign,omitempty"`
	Notation *NotationVerify `json:"notation,omitempty"`
}

// Artifact returns the artifact signature requirements of v (cosign and
// notation), nil when v or both are nil.
func (v *Verify) Artifact() *ArtifactVerify {
	if v == nil || (v.Cosign == nil && v.Notation == nil) {
		return nil
	}
	return &ArtifactVerify{Cosign: v.Cosign, Notation: v.Notation}
}

// SSHVerify names the SSH signers of commits: an allowed signers file in
// the format of git's gpg.ssh.allowedSignersFile.
type SSHVerify struct {
	AllowedSigners string `json:"allowedSigners" jsonschema:"required"`
}

// SourcePath is one folder of the fleet repo a device reads.
type SourcePath struct {
	Pattern string // as configured, e.g. devices/{device}
	Dir     string // with {device} and {label:KEY} replaced
}

// PerDevice reports whether the pattern names the device's own folder:
// it contains {device}.
func (p SourcePath) PerDevice() bool { return strings.Contains(p.Pattern, "{device}") }

// SourcePatterns returns the configured source paths: source.paths, or
// source.path alone, or the repo root ("") when neither is set.
func (c *AgentConfig) SourcePatterns() []string {
	if len(c.Source.Paths) > 0 {
		return c.Source.Paths
	}
	return []string{c.Source.Path}
}

// ExpandSource returns source.ref and the source paths (see
// SourcePatterns) with {device} and {label:KEY} replaced.
func (c *AgentConfig) ExpandSource() (ref string, paths []SourcePath, err error) {
	ref, err = c.expand("source.ref", c.Source.Ref)
	if err != nil {
		return "", nil, err
	}
	for i, p := range c.SourcePatterns() {
		field := "source.path"
		if len(c.Source.Paths) > 0 {
			field = fmt.Sprintf("source.paths[%d]", i)
		}
		dir, err := c.expand(field, p)
		if err != nil {
			return "", nil, err
		}
		paths = append(paths, SourcePath{Pattern: p, Dir: dir})
	}
	return ref, paths, nil
}

func (c *AgentConfig) expand(field, s string) (string, error) {
	var bad *Error
	out := placeholder().ReplaceAllStringFunc(s, func(m string) string {
		key := m[1 : len(m)-1]
		if key == "device" {
			return c.Device
		}
		if label, ok := strings.CutPrefix(key, "label:"); ok {
			if v, ok := c.Labels[label]; ok {
				if !safeElement(v) && bad == nil {
					// An empty label would make devices/{label:site} read
					// devices/, every site's folder; a slash or .. another.
					bad = &Error{Field: field, Msg: fmt.Sprintf("%q: label %s=%q cannot name a folder: a label used in a source path or ref must be a non-empty name without / or \\, and not . or ..", s, label, v)}
				}
				return v
			}
			if bad == nil {
				bad = &Error{Field: field, Msg: fmt.Sprintf("%q uses {label:%s} but the agent has no label %q; set labels.%s in agent.yaml", s, label, label, label)}
			}
			return m
		}
		if bad == nil {
			bad = &Error{Field: field, Msg: fmt.Sprintf("%q has unknown placeholder %s: use {device} or {label:KEY}", s, m)}
		}
		return m
	})
	if bad != nil {
		return "", bad
	}
	return out, nil
}

// IsOCI reports whether a source URL names a fleet published as an OCI
// artifact: oci://HOST/REPO:TAG or oci://HOST/REPO@sha256:DIGEST.
func IsOCI(u string) bool { return strings.HasPrefix(u, "oci://") }

// ociRef matches what follows oci:// in a source URL: a repository with a
// tag or a digest.
var ociRef = lazyRegexp(`^[^/@]+/[^@:]+(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127}|@sha256:[0-9a-f]{64})$`)

// checkOCI checks an oci:// source: a tag or digest in the URL, and none
// of the source fields that only a Git repo has.
func (c *AgentConfig) checkOCI(errs *Errors) {
	if !IsOCI(c.Source.URL) {
		return
	}
	if !ociRef().MatchString(strings.TrimPrefix(c.Source.URL, "oci://")) {
		errs.add("", 0, "source.url", "%q names no artifact: use oci://HOST/REPO:TAG or oci://HOST/REPO@sha256:DIGEST", c.Source.URL)
	}
	if c.Source.Ref != "" {
		errs.add("", 0, "source.ref", "%q is set with an oci:// source.url: the artifact's tag or digest is part of the URL; remove source.ref", c.Source.Ref)
	}
	if v := c.Source.Verify; v != nil && (v.Keyring != "" || v.SSH != nil) {
		errs.add("", 0, "source.verify", "commit signatures (keyring, ssh) cannot be checked in a published artifact, which holds no commits: verify the artifact's own signature with source.verify.cosign or source.verify.notation, or use the Git URL of the fleet repo")
	}
	if c.Source.Auth != nil {
		errs.add("", 0, "source.auth", "registry credentials of an oci:// source come from registries.dockerConfig (or docker login), as for models; remove source.auth")
	}
}

// IsLocalPath reports whether a source URL is a path on this machine rather
// than a URL (scheme://…) or an scp-like address (host:path).
func IsLocalPath(u string) bool {
	if u == "" || strings.Contains(u, "://") {
		return false
	}
	colon, slash := strings.IndexByte(u, ':'), strings.IndexByte(u, '/')
	return colon < 0 || (slash >= 0 && slash < colon)
}

// safeElement reports whether v can stand for one path element: not
// empty, no separator, not . or ...
func safeElement(v string) bool {
	return v != "" && v != "." && v != ".." && !strings.ContainsAny(v, "/\\")
}
