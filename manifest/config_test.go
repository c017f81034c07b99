package manifest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseConfig(t *testing.T) {
	doc := `apiVersion: tend.dev/v1alpha1
kind: AgentConfig
device: cam-017
labels: {site: plant-a}
source:
  url: https://git.example.com/fleet.git
  ref: main
  path: devices/{label:site}/{device}
schedule: "@every 30s"
jitter: 10s
allowPaths: [/etc/infer, /opt/models]
registries: {insecure: [registry.local:5000]}
downloads: {maxRate: 2MiB/s}
`
	c, err := ParseConfig("agent.yaml", []byte(doc))
	require.NoError(t, err)
	c.SetDefaults("host")
	require.NoError(t, c.Validate())
	ref, paths, err := c.ExpandSource()
	require.NoError(t, err)
	require.Equal(t, "main", ref)
	require.Equal(t, []SourcePath{{Pattern: "devices/{label:site}/{device}", Dir: "devices/plant-a/cam-017"}}, paths)
	require.Equal(t, "10s", c.Jitter.D().String())
	require.Equal(t, DefaultStateDir, c.StateDir)
	require.Equal(t, int64(2<<20), c.Downloads.MaxRate.BytesPerSecond())
	require.Equal(t, "2MiB/s", c.Downloads.MaxRate.String())
	require.Equal(t, DefaultMaxLockWait, c.MaxLockWait.D(), "a release waits an hour for an update lock by default")
}

func TestConfigMaxLockWait(t *testing.T) {
	c, err := ParseConfig("agent.yaml", []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x}\nmaxLockWait: 15m\n"))
	require.NoError(t, err)
	c.SetDefaults("host")
	require.NoError(t, c.Validate())
	require.Equal(t, "15m0s", c.MaxLockWait.D().String())

	c.MaxLockWait = Duration(-time.Minute) // set by code, not by YAML, which refuses a negative duration
	require.EqualError(t, c.Validate(), "agent.yaml:4: maxLockWait: -1m is negative: use how long a release may wait for a service's update lock, such as 1h")
}

func TestConfigSourcePaths(t *testing.T) {
	tests := []struct {
		name, source string
		want         []SourcePath
	}{
		{"neither: the repo root", "{url: x}", []SourcePath{{}}},
		{"path", "{url: x, path: \"devices/{device}\"}", []SourcePath{{Pattern: "devices/{device}", Dir: "devices/cam-017"}}},
		{"paths with each placeholder", "{url: x, paths: [profiles, \"sites/{label:site}\", \"devices/{label:site}/{device}\"]}", []SourcePath{
			{Pattern: "profiles", Dir: "profiles"},
			{Pattern: "sites/{label:site}", Dir: "sites/plant-a"},
			{Pattern: "devices/{label:site}/{device}", Dir: "devices/plant-a/cam-017"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\ndevice: cam-017\nlabels: {site: plant-a}\nsource: " + tt.source + "\n"
			c, err := ParseConfig("agent.yaml", []byte(doc))
			require.NoError(t, err)
			c.SetDefaults("host")
			require.NoError(t, c.Validate())
			_, paths, err := c.ExpandSource()
			require.NoError(t, err)
			require.Equal(t, tt.want, paths)
			var perDevice []bool
			for _, p := range paths {
				perDevice = append(perDevice, p.PerDevice())
			}
			require.Equal(t, perDevice[len(perDevice)-1], tt.name != "neither: the repo root", "only a pattern with {device} is the device's own")
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"unknown field", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x, branch: main}\n", `agent.yaml:3: source: unknown field "branch"`},
		{"missing label", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x, path: \"devices/{label:site}\"}\n", `source.path: "devices/{label:site}" uses {label:site} but the agent has no label "site"`},
		{"path and paths", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource:\n  url: x\n  path: devices\n  paths: [profiles]\n",
			`agent.yaml:6: source.paths: source.path "devices" and source.paths are both set`},
		{"missing label in paths", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource:\n  url: x\n  paths:\n    - profiles\n    - \"sites/{label:site}\"\n",
			`agent.yaml:7: source.paths[1]: "sites/{label:site}" uses {label:site} but the agent has no label "site"`},
		{"empty label in a path", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nlabels: {site: \"\"}\nsource: {url: x, paths: [\"devices/{label:site}\"]}\n",
			`source.paths[0]: "devices/{label:site}": label site="" cannot name a folder`},
		{"a label that climbs", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nlabels: {site: ..}\nsource: {url: x, path: \"devices/{label:site}\"}\n",
			`source.path: "devices/{label:site}": label site=".." cannot name a folder`},
		{"unknown placeholder in paths", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x, paths: [\"{hostname}\"]}\n", `source.paths[0]: "{hostname}" has unknown placeholder {hostname}`},
		{"unknown placeholder", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x, ref: \"{hostname}\"}\n", `source.ref: "{hostname}" has unknown placeholder {hostname}`},
		{"missing url", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\n", `source.url: missing`},
		{"bad schedule", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x}\nschedule: often\n", `schedule: invalid schedule "often"`},
		{"relative allow path", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x}\nallowPaths: [etc]\n", `allowPaths[0]: "etc" must be an absolute, clean path`},
		{"relative key ring", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x, verify: {keyring: trusted.asc}}\n", `agent.yaml:3: source.verify.keyring: "trusted.asc" must be the absolute path`},
		{"relative allowed signers", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x, verify: {ssh: {allowedSigners: allowed_signers}}}\n", `agent.yaml:3: source.verify.ssh.allowedSigners: "allowed_signers" must be the absolute path of an allowed signers file`},
		{"verify without a signer", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x, verify: {}}\n", `agent.yaml:3: source.verify: names no signer: set keyring`},
		{"relative docker config", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x}\nregistries: {dockerConfig: config.json}\n", `agent.yaml:4: registries.dockerConfig: "config.json" must be the absolute path`},
		{"insecure registry with a path", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x}\nregistries:\n  insecure: [registry.local:5000/models]\n", `registries.insecure[0]: "registry.local:5000/models" is not a registry host`},
		{"report url not http", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x}\nreport: {url: \"ftp://user:secret@collector\"}\n", `report.url: not an http(s) URL`},
		{"docker host not an engine address", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x}\nruntime: {docker: {host: /var/run/docker.sock}}\n",
			`agent.yaml:4: runtime.docker.host: "/var/run/docker.sock" is not an engine address: use unix:///var/run/docker.sock (Docker)`},
		{"negative keepVersions", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x}\nmodels: {keepVersions: -1}\n", `agent.yaml:4: models.keepVersions: -1 is negative`},
		{"bad maxRate", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x}\ndownloads:\n  maxRate: 2MiB\n",
			`agent.yaml:5: downloads.maxRate: invalid rate "2MiB": use bytes per second, a number with a unit (B, kB, MB, GB, KiB, MiB, GiB) and "/s", e.g. "2MiB/s"`},
		{"zero maxRate", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x}\ndownloads: {maxRate: 0B/s}\n",
			`agent.yaml:4: downloads.maxRate: invalid rate "0B/s": must be at least 1B/s; leave it out for no cap`},
		{"bad verifyInterval", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x}\nmodels: {verifyInterval: daily}\n", `invalid duration "daily"`},
		{"negative maxLockWait", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x}\nmaxLockWait: -1h\n", `agent.yaml:4: maxLockWait: invalid duration "-1h"`},
		{"bad maxLockWait", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x}\nmaxLockWait: forever\n", `agent.yaml:4: maxLockWait: invalid duration "forever"`},
		{"relative token file", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource:\n  url: x\n  auth: {tokenFile: token}\n", `agent.yaml:5: source.auth.tokenFile: "token" must be an absolute path`},
		{"wrong kind", "apiVersion: tend.dev/v1alpha1\nkind: Device\n", `expected apiVersion: tend.dev/v1alpha1 and kind: AgentConfig`},
		{"oci source without a tag", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: \"oci://registry.local:5000/fleet\"}\n",
			`agent.yaml:3: source.url: "oci://registry.local:5000/fleet" names no artifact: use oci://HOST/REPO:TAG`},
		{"oci source with a ref", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: \"oci://registry.local:5000/fleet:main\", ref: main}\n",
			`source.ref: "main" is set with an oci:// source.url: the artifact's tag or digest is part of the URL`},
		{"oci source with verify", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: \"oci://registry.local:5000/fleet:main\", verify: {keyring: /etc/tend/k.asc}}\n",
			`source.verify: commit signatures (keyring, ssh) cannot be checked in a published artifact`},
		{"git source with cosign", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: \"https://git.local/fleet\", verify: {cosign: {keys: [/etc/tend/cosign.pub]}}}\n",
			`source.verify: cosign and notation check a published artifact, and source.url "https://git.local/fleet" is a Git repo`},
		{"oci source with a relative cosign key", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: \"oci://registry.local:5000/fleet:main\", verify: {cosign: {keys: [cosign.pub]}}}\n",
			`source.verify.cosign.keys[0]: "cosign.pub" must be the absolute path of a PEM public key`},
		{"cosign with no signer", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: /r}\nmodels: {verify: {cosign: {}}}\n",
			`models.verify.cosign: names no signer: set keys`},
		{"empty verify", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: /r}\nruntime: {verify: {}}\n",
			`runtime.verify: names no signer: set cosign`},
		{"identities without a trusted root", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: /r}\nmodels: {verify: {cosign: {identities: [{issuer: \"https://i\", subjectRegExp: \"^a\"}]}}}\n",
			`models.verify.cosign.trustedRoot: missing: identities are checked against a Sigstore trusted root`},
		{"identity with a bad regexp", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: /r}\nmodels: {verify: {cosign: {trustedRoot: /t.json, identities: [{issuer: \"https://i\", subjectRegExp: \"(\"}]}}}\n",
			`models.verify.cosign.identities[0].subjectRegExp: "(" is not a regular expression`},
		{"identity without an issuer", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: /r}\nmodels: {verify: {cosign: {trustedRoot: /t.json, identities: [{subjectRegExp: \"^a\"}]}}}\n",
			`models.verify.cosign.identities[0].issuer: missing: the OIDC issuer`},
		{"tlog required without a trusted root", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: /r}\nmodels: {verify: {cosign: {keys: [/k.pub], tlog: required}}}\n",
			`models.verify.cosign.tlog: required needs the transparency log's key: set trustedRoot`},
		{"tlog neither", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: /r}\nmodels: {verify: {cosign: {keys: [/k.pub], tlog: always}}}\n",
			`models.verify.cosign.tlog: "always" is not required or optional`},
		{"a key twice", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: /r}\nmodels: {verify: {cosign: {keys: [/k.pub, /k.pub]}}}\n",
			`models.verify.cosign.keys[1]: "/k.pub" is keys[0] too`},
		{"relative notation paths", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: /r}\nruntime: {verify: {notation: {trustPolicy: tp.json, trustStore: /ts}}}\n",
			`runtime.verify.notation.trustPolicy: "tp.json" must be the absolute path of a Notation trustpolicy.json`},
		{"oci source with auth", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: \"oci://registry.local:5000/fleet:main\", auth: {tokenFile: /t}}\n",
			`source.auth: registry credentials of an oci:// source come from registries.dockerConfig`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig("agent.yaml", []byte(tt.doc))
			if err == nil {
				c.SetDefaults("host")
				err = c.Validate()
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestOCISourceConfig(t *testing.T) {
	for _, url := range []string{
		"oci://registry.local:5000/fleet:main",
		"oci://ghcr.io/acme/fleet/config:v1.2.3",
		"oci://registry.local/fleet@sha256:" + strings.Repeat("ab", 32),
	} {
		t.Run(url, func(t *testing.T) {
			c, err := ParseConfig("agent.yaml", []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: \""+url+"\", path: \"devices/{device}\"}\n"))
			require.NoError(t, err)
			c.SetDefaults("host")
			require.NoError(t, c.Validate())
			require.ErrorContains(t, c.ValidateCI(), "is a published artifact: tend diff and validate --all read the Git fleet repo")
		})
	}
}

// The engine of container services: runtime.docker.host, else
// DOCKER_HOST, else Docker's socket.
func TestDockerHost(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "DOCKER_HOST" {
				return v
			}
			return ""
		}
	}
	c := &AgentConfig{}
	require.Equal(t, DefaultDockerHost, c.DockerHost(env("")))
	require.Equal(t, "unix:///run/podman/podman.sock", c.DockerHost(env("unix:///run/podman/podman.sock")))
	c.Runtime.Docker.Host = "tcp://10.0.0.2:2376"
	require.Equal(t, "tcp://10.0.0.2:2376", c.DockerHost(env("unix:///run/podman/podman.sock")))
}
