package config

import (
	"context"
	"log/slog"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/oci/verify"
	"github.com/tend-dev/tend/ocisource"
	"github.com/tend-dev/tend/source"
)

// RegistryOptions are the registry settings of c (registries.insecure,
// registries.dockerConfig, downloads.maxRate). Every download made with
// them (models, the OCI source, manifests) shares this process's one
// token bucket of downloads.maxRate.
func RegistryOptions(c *manifest.AgentConfig) transport.Options {
	return transport.Options{Insecure: c.Registries.Insecure, Keychain: transport.Keychain(c.Registries.DockerConfig), MaxRate: c.Downloads.MaxRate}
}

// NewVerifier returns a verifier of signatures that reaches registries
// with c's RegistryOptions; it remembers what it verified for its life.
func NewVerifier(c *manifest.AgentConfig) *verify.Verifier {
	return &verify.Verifier{Options: RegistryOptions(c)}
}

// GitAuth is the credentials of the fleet repo, from c.
func GitAuth(c *manifest.AgentConfig) gitsource.Auth {
	a := c.Source.Auth
	if a == nil {
		return gitsource.Auth{}
	}
	return gitsource.Auth{TokenFile: a.TokenFile, UsernameFile: a.UsernameFile, PasswordFile: a.PasswordFile,
		CAFile: a.CAFile, SSHKeyFile: a.SSHKeyFile, KnownHostsFile: a.KnownHostsFile, InsecureIgnoreHostKey: a.InsecureIgnoreHostKey}
}

// GitDir is where the persistent clone of the fleet repo lives.
func GitDir(stateDir string) string { return statedir.Dir(stateDir).Git() }

// OCIDir is where the fleet artifacts of an oci:// source are kept
// unpacked: the target's, and the last applied one's.
func OCIDir(stateDir string) string { return string(statedir.Dir(stateDir).OCI()) }

// SourceDir is where c's source is kept on the node: OCIDir for an
// oci:// source, else GitDir.
func SourceDir(c *manifest.AgentConfig) string {
	if ocisource.IsURL(c.Source.URL) {
		return OCIDir(c.StateDir)
	}
	return GitDir(c.StateDir)
}

// SourcePaths are the expanded source paths as a source reads them.
func SourcePaths(paths []manifest.SourcePath) []source.Path {
	out := make([]source.Path, len(paths))
	for i, p := range paths {
		out[i] = source.Path{Dir: p.Dir, PerDevice: p.PerDevice()}
	}
	return out
}

// NewFetcher builds the source c names, keeping its copy in dir: an OCI
// artifact for an oci:// URL (its signature checked with ver as
// source.verify asks), else a Git repo (its commits checked against
// source.verify's keyring or allowed signers).
func NewFetcher(c *manifest.AgentConfig, dir string, ver *verify.Verifier, log *slog.Logger) (source.Fetcher, error) {
	if ocisource.IsURL(c.Source.URL) {
		f := ocisource.NewFetcher(c.Source.URL, dir, RegistryOptions(c), log)
		f.Verify = sourceVerify(c, ver)
		return f, nil
	}
	ref, _, err := c.ExpandSource()
	if err != nil {
		return nil, err
	}
	f := &gitsource.Fetcher{URL: c.Source.URL, Ref: ref, Auth: GitAuth(c), Dir: dir, Logger: log}
	if v := c.Source.Verify; v != nil {
		f.Trust = gitsource.Trust{Keyring: v.Keyring}
		if v.SSH != nil {
			f.Trust.AllowedSigners = v.SSH.AllowedSigners
		}
	}
	return f, nil
}

// sourceVerify checks a fleet artifact's signature as c's source.verify
// asks; nil when it asks none.
func sourceVerify(c *manifest.AgentConfig, ver *verify.Verifier) func(context.Context, name.Repository, string) error {
	req := c.Source.Verify.Artifact()
	if req == nil {
		return nil
	}
	return func(ctx context.Context, repo name.Repository, digest string) error {
		return ver.Verify(ctx, verify.Target{Kind: verify.KindSource, Repository: repo, Digest: digest}, []*manifest.ArtifactVerify{req})
	}
}
