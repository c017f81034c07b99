package statedir_test

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
)

// strands is what a failure here means: nodes hold their state under
// these names, and a tend that looks elsewhere loses it on upgrade.
const strands = "the on-disk layout changed: this strands every node that upgrades (its inventory, models, services and locks are no longer found)"

// TestLayout pins every path of the layout for one stateDir.
func TestLayout(t *testing.T) {
	d := statedir.Dir("/var/lib/tend")
	sha := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, c := range []struct{ name, got, want string }{
		{"inventory", d.Inventory(), "/var/lib/tend/inventory.json"},
		{"quarantine", d.Quarantine(), "/var/lib/tend/quarantine.json"},
		{"verdict", d.Verdict(), "/var/lib/tend/verdict.json"},
		{"status", d.Status(), "/var/lib/tend/status.json"},
		{"releases", d.Releases(), "/var/lib/tend/releases.json"},
		{"report", d.Report(), "/var/lib/tend/report.json"},
		{"suspended", d.Suspended(), "/var/lib/tend/suspended"},
		{"lock", d.Lock(), "/var/lib/tend/lock"},
		{"format", d.Format(), "/var/lib/tend/format.json"},
		{"format copy", d.FormatCopy(1), "/var/lib/tend/format-1"},
		{"agent lock", d.AgentLock(), "/var/lib/tend/agent.lock"},
		{"git clone", d.Git(), "/var/lib/tend/git"},
		{"fleet artifacts", string(d.OCI()), "/var/lib/tend/oci"},
		{"artifact", string(d.OCI().Artifact("sha256:" + sha)), "/var/lib/tend/oci/sha256-" + sha},
		{"artifact meta", d.OCI().Artifact("sha256:" + sha).Meta(), "/var/lib/tend/oci/sha256-" + sha + "/artifact.json"},
		{"artifact tree", d.OCI().Artifact("sha256:" + sha).Tree(), "/var/lib/tend/oci/sha256-" + sha + "/tree"},
		{"artifact temp prefix", statedir.ArtifactTempPrefix, ".tmp-"},
		{"blobs", string(d.Blobs()), "/var/lib/tend/blobs"},
		{"stored blobs", d.Blobs().Stored("sha256"), "/var/lib/tend/blobs/sha256"},
		{"blob", d.Blobs().Blob("sha256", sha), "/var/lib/tend/blobs/sha256/" + sha},
		{"partial blobs", d.Blobs().Partials(), "/var/lib/tend/blobs/partial"},
		{"partial blob", d.Blobs().Partial("sha256", sha), "/var/lib/tend/blobs/partial/sha256-" + sha},
		{"trees", d.Blobs().Trees("sha256"), "/var/lib/tend/blobs/trees/sha256"},
		{"tree", string(d.Blobs().Tree("sha256", sha)), "/var/lib/tend/blobs/trees/sha256/" + sha},
		{"tree record", d.Blobs().Tree("sha256", sha).Record(), "/var/lib/tend/blobs/trees/sha256/" + sha + "/entries.json"},
		{"tree file", d.Blobs().Tree("sha256", sha).File("7"), "/var/lib/tend/blobs/trees/sha256/" + sha + "/files/7"},
		{"partial trees", d.Blobs().TreePartials(), "/var/lib/tend/blobs/trees/partial"},
		{"partial tree", string(d.Blobs().TreePartial("sha256", sha)), "/var/lib/tend/blobs/trees/partial/sha256-" + sha},
		{"tree lock", d.Blobs().TreeLock("sha256", sha), "/var/lib/tend/blobs/trees/partial/sha256-" + sha + ".lock"},
		{"models", string(d.Models()), "/var/lib/tend/models"},
		{"model", d.Models().Model("llm"), "/var/lib/tend/models/llm"},
		{"model version", d.Models().Version("llm", "v1"), "/var/lib/tend/models/llm/v1"},
		{"model record", d.Models().Record("llm"), "/var/lib/tend/models/llm/model.json"},
		{"model link", d.Models().Link("llm"), "/var/lib/tend/models/llm/current"},
		{"refused models", d.Models().Refused(), "/var/lib/tend/models/refused.json"},
		{"model trash", d.Models().Trash("llm"), "/var/lib/tend/models/.removed-llm"},
		{"services", string(d.Services()), "/var/lib/tend/services"},
		{"service", d.Services().Service("infer"), "/var/lib/tend/services/infer"},
		{"service record", d.Services().Spec("infer"), "/var/lib/tend/services/infer/service.json"},
		{"instance record", d.Services().Instance("infer", 2), "/var/lib/tend/services/infer/2.json"},
		{"instance lock", d.Services().InstanceLock("infer", 2), "/var/lib/tend/services/infer/2.lock"},
		{"service images", d.Services().Images(), "/var/lib/tend/services/images.json"},
		{"service logs", d.Logs("infer"), "/var/lib/tend/logs/infer"},
		{"replica log", d.Log("infer", 2), "/var/lib/tend/logs/infer/2.log"},
	} {
		require.Equal(t, c.want, c.got, "%s: %s", c.name, strands)
	}
	require.Equal(t, fs.FileMode(0o711), statedir.Mode, "stateDir's mode: %s", strands)
}

// TestNames pins the names writers join themselves (atomicfile takes a
// folder and a name): they must agree with the paths above.
func TestNames(t *testing.T) {
	d := statedir.Dir("/s")
	for _, c := range []struct{ dir, name, path string }{
		{"/s", statedir.InventoryFile, d.Inventory()},
		{"/s", statedir.QuarantineFile, d.Quarantine()},
		{"/s", statedir.VerdictFile, d.Verdict()},
		{"/s", statedir.StatusFile, d.Status()},
		{"/s", statedir.ReleasesFile, d.Releases()},
		{"/s", statedir.ReportFile, d.Report()},
		{"/s", statedir.SuspendFile, d.Suspended()},
		{"/s", statedir.LockFile, d.Lock()},
		{"/s", statedir.AgentLockFile, d.AgentLock()},
		{d.Models().Model("m"), statedir.ModelRecordFile, d.Models().Record("m")},
		{d.Models().Model("m"), statedir.ModelLink, d.Models().Link("m")},
		{string(d.Models()), statedir.RefusedFile, d.Models().Refused()},
		{d.Services().Service("s"), statedir.ServiceFile, d.Services().Spec("s")},
		{string(d.Services()), statedir.ImagesFile, d.Services().Images()},
		{string(d.OCI().Artifact("sha256:ab")), statedir.ArtifactFile, d.OCI().Artifact("sha256:ab").Meta()},
	} {
		require.Equal(t, c.path, c.dir+"/"+c.name, strands)
	}
}

// TestReadBack checks that what tend finds on disk maps back to what made
// the name.
func TestReadBack(t *testing.T) {
	t.Run("digests", func(t *testing.T) {
		d := statedir.Dir("/s")
		require.Equal(t, "sha256:ab", statedir.Digest(filepath.Base(d.Blobs().Partial("sha256", "ab"))), "a partial blob")
		require.Equal(t, "sha256:ab", statedir.Digest(filepath.Base(string(d.OCI().Artifact("sha256:ab")))), "an artifact")
		require.Equal(t, "/o/sha256-ab-c", string(statedir.Artifacts("/o").Artifact("sha256:ab-c")), "only the first ':' is replaced")
		require.Equal(t, "sha256:ab-c", statedir.Digest("sha256-ab-c"), "only the first '-' is read back")
	})
	t.Run("replicas", func(t *testing.T) {
		for _, c := range []struct {
			name    string
			parse   func(string) (int, bool)
			replica int
			ok      bool
		}{
			{"3.json", statedir.InstanceReplica, 3, true},
			{"service.json", statedir.InstanceReplica, 0, false},
			{"3.lock", statedir.InstanceReplica, 0, false},
			{"3.log", statedir.LogReplica, 3, true},
			{"3.log.1", statedir.LogReplica, 0, false},
			{"x.log", statedir.LogReplica, 0, false},
		} {
			r, ok := c.parse(c.name)
			require.Equal(t, c.ok, ok, c.name)
			if ok {
				require.Equal(t, c.replica, r, c.name)
			}
		}
	})
}
