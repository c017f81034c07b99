package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// verdictPoints are where tend is killed while a release awaits its
// verdict: once the record is written (before the service starts), and
// once the service runs and its health is being waited for.
var verdictPoints = []string{"verdict:recorded", "service:health"}

// TestCrashAwaitingAnUnhealthyVerdict kills apply while rev3 (whose
// service never becomes healthy) awaits its verdict. The next apply judges
// it again: rev3 is rolled back to rev2 and quarantined, as an apply left
// alone would have done, and is not applied again.
func TestCrashAwaitingAnUnhealthyVerdict(t *testing.T) {
	f := newCrashFleet(t)
	for _, point := range verdictPoints {
		t.Run(point, func(t *testing.T) {
			n := f.node(t)
			_, errOut, code := n.tend("apply", "--ref", f.rev2)
			require.Equal(t, 0, code, errOut)
			n.crash(f.rev3, point)
			v, err := applier.LoadVerdict(n.state)
			require.NoError(t, err)
			require.NotNil(t, v, "no verdict awaited after the kill")
			require.True(t, strings.HasSuffix(v.Revision, "@sha1:"+f.rev3), v.Revision)
			require.True(t, strings.HasSuffix(v.Previous, "@sha1:"+f.rev2), v.Previous)
			require.Equal(t, []applier.VerdictKey{{Key: f.rev3, Revision: v.Revision}}, v.Keys)

			// The fleet's branch names rev3, as an agent's would.
			_, errOut, code = n.tend("apply")
			require.Equal(t, 1, code, errOut)
			require.Contains(t, errOut, "service/infer did not become healthy")
			if point == "service:health" {
				// Judged again: rolled back in full to rev2 as applied.
				require.Contains(t, errOut, "judged again after tend was interrupted")
				require.Equal(t, "config 2\n", n.read("etc/infer/config.yaml"), "rev2 was not put back:\n%s", errOut)
			} else {
				// Nothing of rev3 had started: the apply tried it, as one
				// never killed does.
				require.NotContains(t, errOut, "judged again after tend was interrupted")
			}
			q, err := applier.LoadQuarantine(n.state)
			require.NoError(t, err)
			require.Contains(t, q, f.rev3)
			require.Contains(t, q[f.rev3].Reason, "service/infer did not become healthy")
			v, err = applier.LoadVerdict(n.state)
			require.NoError(t, err)
			require.Nil(t, v, "the verdict is still awaited")

			_, errOut, code = n.tend("apply", "--ref", f.rev3)
			require.Equal(t, 1, code, errOut)
			require.NotContains(t, errOut, `msg="rolling back"`, "rev3 was tried again")
			f.converged(t, n)
		})
	}
}

// TestCrashAwaitingAHealthyVerdict kills apply while rev2 (whose service
// is healthy) awaits its verdict: the next apply judges it healthy, keeps
// it, and quarantines nothing.
func TestCrashAwaitingAHealthyVerdict(t *testing.T) {
	f := newCrashFleet(t)
	for _, point := range verdictPoints {
		t.Run(point, func(t *testing.T) {
			n := f.node(t)
			n.crash(f.rev2, point)
			v, err := applier.LoadVerdict(n.state)
			require.NoError(t, err)
			require.NotNil(t, v, "no verdict awaited after the kill")
			f.converged(t, n)
			v, err = applier.LoadVerdict(n.state)
			require.NoError(t, err)
			require.Nil(t, v, "the verdict is still awaited")
			q, err := applier.LoadQuarantine(n.state)
			require.NoError(t, err)
			require.Empty(t, q)
		})
	}
}

// TestCrashAwaitingAModelVerdict kills apply while a model's tag moved to
// a version that makes its service unhealthy (same commit) awaits its
// verdict: the next apply quarantines the digest, puts the good version
// back, and the service runs on it.
func TestCrashAwaitingAModelVerdict(t *testing.T) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	const tag = "models/m:verdict"
	n := followModel(t, reg, repo, tag)

	bad := reg.PushFiles(t, tag, map[string][]byte{"model.onnx": []byte("bad")})
	n.crash("", "service:health")
	require.Equal(t, "bad", n.read("opt/models/m/model.onnx"))
	v, err := applier.LoadVerdict(n.state)
	require.NoError(t, err)
	require.NotNil(t, v)
	require.Equal(t, []string{applier.ReleaseKey("model/m", bad)}, keysOf(v))

	_, errOut, code := n.tend("apply")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "service/infer did not become healthy")
	require.Equal(t, "good", n.read("opt/models/m/model.onnx"), "the good version was not put back")
	q, err := applier.LoadQuarantine(n.state)
	require.NoError(t, err)
	require.Contains(t, q, applier.ReleaseKey("model/m", bad))

	keptGood(t, n)
	v, err = applier.LoadVerdict(n.state)
	require.NoError(t, err)
	require.Nil(t, v, "the verdict is still awaited")
}

func keysOf(v *applier.Verdict) []string {
	var out []string
	for _, k := range v.Keys {
		out = append(out, k.Key)
	}
	return out
}

// The same kill, and then the agent starts (after a reboot, or systemd
// restarting it): its first tick judges rev3 again, rolls back to rev2
// and quarantines rev3, and its ticks after keep rev2.
func TestCrashAwaitingAVerdictThenTheAgent(t *testing.T) {
	f := newCrashFleet(t)
	n := f.node(t)
	_, errOut, code := n.tend("apply", "--ref", f.rev2)
	require.Equal(t, 0, code, errOut)
	n.crash(f.rev3, "service:health")
	v, err := applier.LoadVerdict(n.state)
	require.NoError(t, err)
	require.NotNil(t, v, "no verdict awaited after the kill")

	a := startAgent(t, n, "--schedule", "@every 1s")
	eventually(t, func() bool {
		q, err := applier.LoadQuarantine(n.state)
		return err == nil && q[f.rev3].Reason != ""
	})
	eventually(t, func() bool { return strings.Contains(a.logs(), "judged again after tend was interrupted") })
	eventually(t, func() bool { return n.read("etc/infer/config.yaml") == "config 2\n" })
	v, err = applier.LoadVerdict(n.state)
	require.NoError(t, err)
	require.Nil(t, v, "the verdict is still awaited")
	// A later tick keeps rev2: rev3 is not tried again.
	eventually(t, func() bool { return strings.Contains(a.logs(), "commit "+f.rev3[:12]+" was rolled back on this node") })
	require.Equal(t, "config 2\n", n.read("etc/infer/config.yaml"))
	require.Equal(t, 1, strings.Count(a.logs(), `msg="rolling back"`), "rev3 was tried again:\n%s", a.logs())
	a.stop()
}
