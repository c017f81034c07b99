package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testcosign"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/verify"
	"github.com/tend-dev/tend/planner"
)

// skipNode is an agent whose models.verify asks for a cosign key, with a
// model m that follows a semver policy in a registry where the real
// cosign CLI signs some versions.
type skipNode struct {
	*heldLoop
	t      *testing.T
	reg    *testoci.Registry
	repo   *testgit.Repo
	cosign *testcosign.Cosign
	priv   string
	pub    string
	now    time.Time
	pushed map[string]string // tag → digest
}

func newSkipNode(t *testing.T) *skipNode {
	t.Helper()
	n := &skipNode{t: t, reg: testoci.Start(t), repo: testgit.NewRepo(t), cosign: testcosign.New(t),
		now: time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC), pushed: map[string]string{}}
	n.priv, n.pub = n.cosign.KeyPair("release")
	n.policy(">=1.0.0")
	n.heldLoop = newHeldLoop(t, n.repo)
	n.r.Config.Registries.Insecure = []string{n.reg.Host}
	n.r.Config.Models.Verify = &manifest.ArtifactVerify{Cosign: &manifest.CosignVerify{Keys: []string{n.pub}}}
	require.NoError(t, n.r.Config.Validate())
	n.r.Now = func() time.Time { return n.now }
	n.r.OnVerify(n.metrics.Verified)
	return n
}

// policy commits the device with model m following semver rng.
func (n *skipNode) policy(rng string) {
	n.repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "good")+
		"  models:\n    - {name: m, ref: "+n.reg.Ref("models/m")+", policy: {semver: \""+rng+"\"}}\n")
	n.repo.Commit("m " + rng)
}

// push pushes version tag of m, signed or not.
func (n *skipNode) push(tag string, signed bool) {
	d := n.reg.PushFiles(n.t, "models/m:"+tag, map[string][]byte{"w.bin": []byte("weights " + tag)})
	if signed {
		n.cosign.Sign(n.priv, n.reg.Ref("models/m@"+d))
	}
	n.pushed[tag] = d
}

// quarantine records version tag of m as rolled back on this node.
func (n *skipNode) quarantine(tag string) {
	key := applier.ReleaseKey(planner.ModelID("m"), n.pushed[tag])
	require.NoError(n.t, applier.Quarantine(n.r.Config.StateDir, key, applier.Quarantined{Revision: key, Tag: tag,
		Reason: "service/web did not become healthy", At: time.Date(2026, 12, 3, 7, 51, 1, 0, time.UTC)}))
}

// weights is what m's active version holds; "" when none is.
func (n *skipNode) weights() string {
	b, err := os.ReadFile(filepath.Join(n.r.Config.StateDir, "models/m/current/w.bin"))
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(n.t, err)
	return string(b)
}

// metric reads one series.
func (n *skipNode) metric(series string) float64 {
	return scrape(n.t, n.metrics)[series]
}

// report is what a tick says, as a golden file holds it: the status's
// warning and last error, with the registry, the key's folder and the
// digests of the versions named.
func (n *skipNode) report() []byte {
	st := n.tracker.Status()
	s := "warning:\n" + st.Warning + "\nlastError:\n" + st.LastError + "\n"
	s = strings.ReplaceAll(s, n.reg.Host, "<registry>")
	s = strings.ReplaceAll(s, n.cosign.Dir, "<cosign>")
	for tag, d := range n.pushed {
		s = strings.ReplaceAll(s, d, "<"+tag+">")
		s = strings.ReplaceAll(s, planner.ShortDigest(d), "<"+tag+" short>")
	}
	return []byte(regexp.MustCompile(`\n{2,}`).ReplaceAllString(s, "\n"))
}

// A semver policy passes over a version that is not signed as
// models.verify asks for the next highest matching tag, as it passes over
// one rolled back here: the device moves to, or stays on, the highest
// signed version; the status warning names each version passed over and
// why; tend_policy_skipped_total counts it by reason at every tick; when
// every version is passed over, the model is held with an error naming
// each.
func TestPolicySkipsWhatCannotRun(t *testing.T) {
	const (
		unverified  = `tend_policy_skipped_total{reason="unverified"}`
		quarantined = `tend_policy_skipped_total{reason="quarantined"}`
		heldQ       = `tend_release_held{reason="quarantined"}`
	)
	for _, tc := range []struct {
		name    string
		golden  string // testdata/policy-skip-GOLDEN.golden: the status's warning and error
		setup   func(n *skipNode)
		weights string // what m runs after the tick; "" none
		failed  bool   // the tick fails (the model is held)
		skipped map[string]float64
		heldQ   float64
	}{
		{
			name:   "unsigned highest skipped for the signed one below",
			golden: "unsigned",
			setup: func(n *skipNode) {
				n.push("1.0.0", true)
				n.push("1.1.0", true)
				n.push("1.2.0", false)
			},
			weights: "weights 1.1.0",
			skipped: map[string]float64{unverified: 1, quarantined: 0},
		},
		{
			name:   "an unsigned new version leaves the device on its own",
			golden: "stays",
			setup: func(n *skipNode) {
				n.push("1.0.0", true)
				n.scheduled()
				require.NoError(t, n.err)
				n.push("1.1.0", false)
			},
			weights: "weights 1.0.0",
			skipped: map[string]float64{unverified: 1, quarantined: 0},
		},
		{
			name:   "quarantined and unverified",
			golden: "mix",
			setup: func(n *skipNode) {
				n.push("1.0.0", true)
				n.push("1.1.0", true)
				n.push("1.2.0", false)
				n.quarantine("1.1.0")
			},
			weights: "weights 1.0.0",
			skipped: map[string]float64{unverified: 1, quarantined: 1},
			heldQ:   1,
		},
		{
			name:   "every version unverified",
			golden: "all-unverified",
			setup: func(n *skipNode) {
				n.push("1.0.0", false)
				n.push("1.1.0", false)
			},
			failed:  true,
			skipped: map[string]float64{unverified: 2, quarantined: 0},
		},
		{
			name:   "every version unverified or quarantined, the active one kept",
			golden: "all-refused-kept",
			setup: func(n *skipNode) {
				n.push("1.0.0", true)
				n.scheduled()
				require.NoError(t, n.err)
				n.policy(">=2.0.0")
				n.push("2.0.0", true)
				n.push("2.1.0", false)
				n.quarantine("2.0.0")
			},
			weights: "weights 1.0.0",
			failed:  true,
			skipped: map[string]float64{unverified: 1, quarantined: 1},
			heldQ:   1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newSkipNode(t)
			tc.setup(n)
			n.scheduled()
			if tc.failed {
				require.Error(t, n.err)
			} else {
				require.NoError(t, n.err)
			}
			require.Equal(t, tc.weights, n.weights())
			for series, v := range tc.skipped {
				require.Equal(t, v, n.metric(series), series)
			}
			require.Equal(t, tc.heldQ, n.metric(heldQ))
			golden.Assert(t, "policy-skip-"+tc.golden+".golden", n.report())

			// Counted again by the next tick that renders; one held off by
			// the failure backoff renders nothing and counts nothing.
			times := 2.0
			if tc.failed {
				times = 1
			}
			n.scheduled()
			for series, v := range tc.skipped {
				require.Equal(t, times*v, n.metric(series), series)
			}
		})
	}
}

// A version found unsigned is verified once, not every tick: the ticks
// that follow pass it over without asking for its signatures (nor count
// it in tend_verify_total) until verify.RecheckUnsigned has passed; then
// it is asked of again, and taken once signed.
func TestPolicyVerifiesAnUnsignedVersionOnce(t *testing.T) {
	n := newSkipNode(t)
	n.push("1.0.0", true)
	n.push("1.1.0", false)
	n.scheduled()
	require.NoError(t, n.err)
	require.Equal(t, "weights 1.0.0", n.weights())
	require.Equal(t, n.tracker.Status().Warning, n.res.Desired.Document().Spec.Models[0].Unverified, "tend render says it too")
	require.Equal(t, 1.0, n.metric(`tend_verify_total{kind="model",result="ok"}`))
	require.Equal(t, 1.0, n.metric(`tend_verify_total{kind="model",result="failed"}`))
	asked := n.r.verifier().Requests()

	n.cosign.Sign(n.priv, n.reg.Ref("models/m@"+n.pushed["1.1.0"]))
	n.now = n.now.Add(verify.RecheckUnsigned - time.Second)
	n.scheduled()
	require.NoError(t, n.err)
	require.Equal(t, "weights 1.0.0", n.weights())
	require.Equal(t, asked, n.r.verifier().Requests(), "a version found unsigned is not asked of again before RecheckUnsigned")
	require.Equal(t, 1.0, n.metric(`tend_verify_total{kind="model",result="failed"}`))
	require.Contains(t, n.tracker.Status().Warning, "model/m: skipped 1.1.0")

	n.now = n.now.Add(time.Second)
	n.scheduled()
	require.NoError(t, n.err)
	require.Equal(t, "weights 1.1.0", n.weights(), "signed since, it is taken")
	require.Equal(t, 2.0, n.metric(`tend_verify_total{kind="model",result="ok"}`))
	require.Empty(t, n.tracker.Status().Warning)
	require.Equal(t, 2.0, n.metric(`tend_policy_skipped_total{reason="unverified"}`))
}
