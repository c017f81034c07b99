package e2e

// End-to-end tests: the built tend binary against real Git repositories,
// read as a local path and over smart HTTP from the real git http-backend,
// with a temp folder as the node's root.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/makevar"
	"github.com/tend-dev/tend/internal/testkit/testdocker"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testhub"
	"github.com/tend-dev/tend/internal/testkit/testnode"
)

var tendBin string

// hubBin is tend-hub, built by TestMain beside tendBin.
var hubBin string

// tendPkg is the package of the tend binary under test: cmd/tend, the
// folder above.
const tendPkg = ".."

// TestMain builds the tend binary the end-to-end suite runs. With -short
// the suite is skipped: make test runs it (go test -short ./cmd/tend runs
// the unit tests of package main).
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping the end-to-end suite of tend (-short)")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "tend-e2e-")
	if err != nil {
		panic(err)
	}
	tendBin = filepath.Join(dir, "tend")
	// As make build ships it (the Makefile's TAGS), with the omit tags
	// this test is built with.
	tags, err := makevar.Get("TAGS")
	if err != nil {
		panic(err)
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-tags", strings.TrimSpace(tags+" "+omittedTags()), "-o", tendBin, tendPkg)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic(fmt.Sprintf("build tend: %v", err))
	}
	if hubBin, err = testhub.Build(dir, ""); err != nil {
		panic(err)
	}
	code := testdocker.Main(m) // stops the Docker Engine a container test started
	os.RemoveAll(dir)
	os.Exit(code)
}

const device = `apiVersion: tend.dev/v1alpha1
kind: Device
metadata: {name: cam-017}
spec:
  files:
%s`

func files(entries ...string) string {
	if len(entries) == 0 {
		return strings.Replace(device, "spec:\n  files:\n%s", "spec: {}\n", 1)
	}
	return fmt.Sprintf(device, strings.Join(entries, ""))
}

func entry(path, content, mode string) string {
	s := fmt.Sprintf("    - path: %s\n      content: %q\n", path, content)
	if mode != "" {
		s += fmt.Sprintf("      mode: %q\n", mode)
	}
	return s
}

// node is one simulated device: a root folder, a state dir and the flags
// that point tend at them and at the fleet repo.
type node struct {
	t     *testing.T
	root  string
	state string
	flags []string
}

func newNode(t *testing.T, repoURL string, extra ...string) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{t: t, root: filepath.Join(dir, "root"), state: filepath.Join(dir, "state")}
	require.NoError(t, os.MkdirAll(n.root, 0o755))
	n.flags = append([]string{"--repo", repoURL, "--device", "cam-017", "--path", "devices/{device}",
		"--root", n.root, "--state-dir", n.state, "--allow-path", "/etc/infer", "--log-format", "text", "--listen", "off",
		"--config", filepath.Join(dir, "none.yaml")}, extra...)
	// --config names a file that must exist; write an empty-source config.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "none.yaml"), []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\n"), 0o644))
	return n
}

// tend runs the binary with the node's flags and returns stdout, stderr and
// the exit code.
func (n *node) tend(command string, extra ...string) (string, string, int) {
	n.t.Helper()
	return n.tendAt(tendBin, command, extra...)
}

// tendAt runs the tend binary bin (another build than the one under test)
// as n.tend runs this one.
func (n *node) tendAt(bin, command string, extra ...string) (string, string, int) {
	n.t.Helper()
	args := append(append([]string{command}, n.flags...), extra...)
	return runTend(n.t, bin, args...)
}

func tend(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runTend(t, tendBin, args...)
}

// runTend runs the tend binary bin with args and returns stdout, stderr
// and the exit code.
func runTend(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TEND_CONFIG=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run tend %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

func (n *node) read(path string) string {
	n.t.Helper()
	b, err := os.ReadFile(filepath.Join(n.root, path))
	require.NoError(n.t, err)
	return string(b)
}

func (n *node) write(path, content string) {
	n.t.Helper()
	require.NoError(n.t, os.WriteFile(filepath.Join(n.root, path), []byte(content), 0o644))
}

// snapshot lists every file under the root and the state dir's inventory
// with content and mode, to prove a failed run changed nothing.
func (n *node) snapshot() map[string]string {
	n.t.Helper()
	return treeSnapshot(n.root, filepath.Join(n.state, "inventory.json"))
}

// treeSnapshot maps each file under paths (files or folders) to its mode
// and content, or a symlink to its target.
func treeSnapshot(paths ...string) map[string]string {
	out := map[string]string{}
	for _, dir := range paths {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			fi, _ := d.Info()
			if fi != nil && fi.Mode()&fs.ModeSymlink != 0 {
				target, _ := os.Readlink(p)
				out[p] = fmt.Sprintf("%v %s", fi.Mode(), target)
				return nil
			}
			b, _ := os.ReadFile(p)
			out[p] = fmt.Sprintf("%v %s", fi.Mode(), b)
			return nil
		})
	}
	return out
}

func TestApplyLoop(t *testing.T) {
	repo := testgit.NewRepo(t)
	srv := testgit.StartHTTP(t, filepath.Dir(repo.Dir()))
	for name, url := range map[string]string{"local path": repo.Dir(), "smart http": repo.URL(srv.URL)} {
		t.Run(name, func(t *testing.T) {
			repo.WriteFile("devices/cam-017/device.yaml", files(
				entry("/etc/infer/config.yaml", "threshold: 0.4\n", "0600"),
				entry("/etc/infer/labels.txt", "person\n", "")))
			repo.WriteFile("devices/cam-018/device.yaml", strings.ReplaceAll(files(entry("/etc/infer/x", "x", "")), "cam-017", "cam-018"))
			first := repo.Commit("two files")
			n := newNode(t, url)

			out, errOut, code := n.tend("plan", "--detailed-exitcode")
			require.Equal(t, 2, code, errOut)
			require.Contains(t, out, "Plan for device cam-017 at HEAD@sha1:"+first)
			require.Contains(t, out, "+ file/etc/infer/config.yaml")
			require.Contains(t, out, "Plan: 2 to add, 0 to change, 0 to delete, 0 unchanged.")
			require.NoFileExists(t, filepath.Join(n.root, "etc/infer/config.yaml"), "plan must change nothing")

			out, errOut, code = n.tend("apply")
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, "Apply complete: 2 actions applied")
			require.Equal(t, "threshold: 0.4\n", n.read("etc/infer/config.yaml"))
			fi, err := os.Stat(filepath.Join(n.root, "etc/infer/config.yaml"))
			require.NoError(t, err)
			require.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())

			out, errOut, code = n.tend("apply")
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, "Plan: 0 to add, 0 to change, 0 to delete, 2 unchanged.", "apply twice does nothing the second time")

			n.write("etc/infer/labels.txt", "edited by hand\n")
			out, _, code = n.tend("plan", "--detailed-exitcode")
			require.Equal(t, 2, code)
			require.Contains(t, out, "~ file/etc/infer/labels.txt  drift: content changed on node")
			_, errOut, code = n.tend("apply")
			require.Equal(t, 0, code, errOut)
			require.Equal(t, "person\n", n.read("etc/infer/labels.txt"), "drift is reverted")

			// A file tend never created, in an allowed folder, is left alone.
			n.write("etc/infer/local.conf", "mine\n")
			repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.5\n", "0600")))
			second := repo.Commit("drop labels, raise threshold")
			out, errOut, code = n.tend("apply", "--format", "json")
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, `"revision": "HEAD@sha1:`+second)
			require.Contains(t, out, `"reason": "update: content changed in Git"`)
			require.Contains(t, out, `"reason": "no longer declared"`)
			require.Equal(t, "threshold: 0.5\n", n.read("etc/infer/config.yaml"))
			require.NoFileExists(t, filepath.Join(n.root, "etc/infer/labels.txt"))
			require.Equal(t, "mine\n", n.read("etc/infer/local.conf"))
		})
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	repo := testgit.NewRepo(t)
	good := files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", ""))
	repo.WriteFile("devices/cam-017/device.yaml", good)
	repo.Commit("good")

	tests := []struct {
		name  string
		doc   string
		flags []string
		want  []string
		valid bool // validate accepts it; only planning refuses it
	}{
		{name: "malformed yaml", doc: "apiVersion: tend.dev/v1alpha1\nkind: Device\nspec: [\n", want: []string{"devices/cam-017/device.yaml:3", "malformed YAML"}},
		{name: "unknown field", doc: strings.Replace(good, "content:", "contents:", 1), want: []string{"devices/cam-017/device.yaml:7", `spec.files[0]: unknown field "contents"`}},
		{name: "duplicate names", doc: files(entry("/etc/infer/a", "1", ""), entry("/etc/infer/a", "2", "")), want: []string{"device.yaml:8: spec.files[1].path", "declared twice"}},
		{name: "relative path", doc: files(entry("etc/infer/a", "1", "")), want: []string{"device.yaml:6: spec.files[0].path", "is relative"}},
		{name: "escaping path", doc: files(entry("/etc/infer/../../root/.ssh/authorized_keys", "1", "")), want: []string{"spec.files[0].path", "not a clean path"}},
		{name: "outside allowPaths", doc: files(entry("/etc/passwd", "1", "")), want: []string{"spec.files[0].path", "outside allowPaths"}},
		{name: "bad mode", doc: files(entry("/etc/infer/a", "1", "999")), want: []string{"device.yaml:8: spec.files[0].mode", `invalid mode "999"`}},
		{name: "missing ref", doc: good, flags: []string{"--ref", "no-such-branch"}, want: []string{`"no-such-branch"`, "not found"}},
		{name: "missing device path", doc: good, flags: []string{"--device", "cam-404"}, want: []string{"no manifests for device cam-404 at devices/cam-404 in " + repo.Dir() + "@HEAD"}},
		{name: "unreadable repo", doc: good, flags: []string{"--repo", filepath.Join(t.TempDir(), "nowhere")}, want: []string{"fetch ", "nowhere"}},
		{name: "empty declaration", doc: files(), want: []string{"declares no resources", "allowEmpty: true", "--allow-empty"}, valid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo.WriteFile("devices/cam-017/device.yaml", good)
			repo.Commit("good again")
			n := newNode(t, repo.Dir())
			_, errOut, code := n.tend("apply")
			require.Equal(t, 0, code, errOut)
			before := n.snapshot()

			repo.WriteFile("devices/cam-017/device.yaml", tt.doc)
			repo.Commit(tt.name)
			for _, cmd := range []string{"validate", "plan", "apply"} {
				if cmd == "validate" && tt.valid {
					continue
				}
				_, errOut, code = n.tend(cmd, tt.flags...)
				require.Equal(t, 1, code, "%s: %s", cmd, errOut)
				for _, w := range tt.want {
					require.Contains(t, errOut, w, cmd)
				}
			}
			require.Equal(t, before, n.snapshot(), "nothing on the node changed")
			require.Equal(t, "threshold: 0.4\n", n.read("etc/infer/config.yaml"))
		})
	}
}

func TestAllowEmptyPrunes(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/a", "1", "")))
	repo.Commit("one")
	n := newNode(t, repo.Dir())
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)
	repo.WriteFile("devices/cam-017/device.yaml", files())
	repo.Commit("none")
	out, errOut, code := n.tend("apply", "--allow-empty")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "- file/etc/infer/a")
	require.NoFileExists(t, filepath.Join(n.root, "etc/infer/a"))
}

func TestAgentRevertsDrift(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", "")))
	repo.Commit("one file")
	n := newNode(t, repo.Dir(), "--schedule", "@every 1s", "--jitter", "0s")

	var log bytes.Buffer
	cmd := exec.Command(tendBin, append([]string{"agent"}, n.flags...)...)
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(n.root, "etc/infer/config.yaml"))
		return string(b) == "threshold: 0.4\n"
	})
	n.write("etc/infer/config.yaml", "threshold: 0.99\n")
	eventually(t, func() bool { return n.read("etc/infer/config.yaml") == "threshold: 0.4\n" })

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		require.NoError(t, err, log.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("agent did not stop on SIGTERM:\n%s", log.String())
	}
	require.Contains(t, log.String(), "msg=drift")
	require.Contains(t, log.String(), "resource=file/etc/infer/config.yaml")
	require.Contains(t, log.String(), "msg=reconciled")
}

func TestSecondTendWaitsForTheLock(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/a", "1", "")))
	repo.Commit("one")
	n := newNode(t, repo.Dir())
	require.NoError(t, os.MkdirAll(n.state, 0o700))
	f, err := os.OpenFile(filepath.Join(n.state, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	_, errOut, code := n.tend("apply", "--lock-timeout", "300ms")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "another tend")
	require.NoFileExists(t, filepath.Join(n.root, "etc/infer/a"))
}

func TestValidateFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "devices/cam-017"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "devices/cam-017/d.yaml"), []byte(files(entry("/etc/infer/a", "1", ""))), 0o644))
	out, errOut, code := tend(t, "validate", dir)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "valid: device cam-017: 0 models, 1 file, 0 services\n"+
		"(allowPaths not checked: none given; give --config, --allow-path or an AgentConfig file among the files to check that every path lies under them)\n", out)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "devices/cam-017/bad.yml"), []byte(files(entry("/etc/infer/b", "1", "0x1"))), 0o644))
	out, errOut, code = tend(t, "validate", dir)
	require.Equal(t, 1, code)
	require.Contains(t, out, "invalid: device cam-017:\n  "+dir+"/devices/cam-017/bad.yml:8: spec.files[0].mode: invalid mode \"0x1\"")
	require.Equal(t, "Error: 1 of 1 device invalid: cam-017\n", errOut)
}

// An agent config given to validate is checked as a config, and its
// allowPaths check the manifests given with it.
func TestValidateAgentConfigFile(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	write := func(name, data string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	write("agent.yaml", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\ndevice: cam-017\nsource: {url: https://git.example.com/fleet.git}\nallowPaths: [/etc/infer]\n")
	write("devices/cam-017/d.yaml", files(entry("/etc/infer/a", "1", "")))
	out, errOut, code := tend(t, "validate", cfg)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "valid: agent config "+cfg+": device cam-017, source https://git.example.com/fleet.git\n", out)

	out, errOut, code = tend(t, "validate", cfg, filepath.Join(dir, "devices"))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "valid: device cam-017: 0 models, 1 file, 0 services\n(paths checked against the allowPaths of "+cfg+")\n")

	write("devices/cam-017/d.yaml", files(entry("/opt/models/a", "1", "")))
	out, _, code = tend(t, "validate", cfg, filepath.Join(dir, "devices"))
	require.Equal(t, 1, code)
	require.Contains(t, out, `spec.files[0].path: "/opt/models/a" is outside allowPaths [/etc/infer]`)

	write("agent.yaml", "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: https://git.example.com/fleet.git}\nschedule: often\n")
	_, errOut, code = tend(t, "validate", cfg)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, cfg+`:4: schedule: invalid schedule "often"`)
}

func TestVersion(t *testing.T) {
	out, _, code := tend(t, "version")
	require.Equal(t, 0, code)
	require.Regexp(t, `^tend \S+ \(commit \S+, go1\.\d+`, out)
}

func eventually(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestEnvironmentDefaults(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/a", "1", ""), entry("/opt/models/b", "2", "")))
	repo.Commit("two folders")
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "root"), 0o755))
	env := []string{"TEND_REPO=" + repo.Dir(), "TEND_DEVICE=cam-017", "TEND_PATH=devices/{device}",
		"TEND_ROOT=" + filepath.Join(dir, "root"), "TEND_STATE_DIR=" + filepath.Join(dir, "state"),
		"TEND_ALLOW_PATH=/etc/infer,/opt/models", "TEND_FORMAT=yaml", "TEND_CONFIG=" + filepath.Join(dir, "none.yaml")}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "none.yaml"), []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\n"), 0o644))

	run := func(args ...string) (string, string, int) {
		cmd := exec.Command(tendBin, args...)
		cmd.Env = append(os.Environ(), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.String(), stderr.String(), ee.ExitCode()
		}
		require.NoError(t, err)
		return stdout.String(), stderr.String(), 0
	}
	out, errOut, code := run("plan")
	require.Equal(t, 0, code, "TEND_FORMAT must not reach plan's own --format: %s", errOut)
	require.Contains(t, out, "Plan: 2 to add")

	_, errOut, code = run("plan", "--allow-path", "/etc/infer")
	require.Equal(t, 1, code, "a flag beats the environment")
	require.Contains(t, errOut, `"/opt/models/b" is outside allowPaths [/etc/infer]`)

	env = append(env, "TEND_SCHEDULE=whenever")
	_, errOut, code = run("agent")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `--schedule (schedule): invalid schedule "whenever"`)
	_, errOut, code = run("plan")
	require.Equal(t, 0, code, "plan uses no schedule: %s", errOut)
}

func TestUnreachableRepoHoldsLastApplied(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", "")))
	repo.Commit("one file")
	srv := testgit.StartHTTP(t, filepath.Dir(repo.Dir()))
	n := newNode(t, repo.URL(srv.URL))
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)

	srv.Close()
	n.write("etc/infer/config.yaml", "edited while offline\n")
	out, errOut, code := n.tend("apply")
	require.Equal(t, 1, code, "the failure to reach the repo is still an error")
	require.Contains(t, errOut, "unreachable; holding the last applied commit")
	require.Contains(t, out, "drift: content changed on node")
	require.Equal(t, "threshold: 0.4\n", n.read("etc/infer/config.yaml"), "the node is held at its last applied state")
}

// A bad flag fails before any work: nothing is fetched, nothing on the node
// changes.
func TestBadFlagsChangeNothing(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", "")))
	repo.Commit("one file")
	n := newNode(t, repo.Dir())
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)
	n.write("etc/infer/config.yaml", "edited by hand\n")
	before := n.snapshot()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"apply", "--format", "yaml"}, `--format "yaml": use text or json`},
		{[]string{"plan", "--format", "markdown"}, `--format "markdown": use text or json`},
		{[]string{"render", "--format", "text"}, `--format "text": use yaml or json`},
		{[]string{"apply", "--log-format", "xml"}, `--log-format "xml"`},
		{[]string{"apply", "--log-level", "loud"}, `--log-level "loud"`},
		{[]string{"apply", "--jitter", "soon"}, `--jitter (or TEND_JITTER): invalid duration "soon"`},
		{[]string{"apply", "--max-rate", "2MiB"}, `--max-rate (or TEND_MAX_RATE): invalid rate "2MiB": use bytes per second, a number with a unit (B, kB, MB, GB, KiB, MiB, GiB) and "/s", e.g. "2MiB/s"`},
		{[]string{"apply", "--allow-path", "etc/infer"}, `--allow-path (allowPaths[1]): "etc/infer" must be an absolute, clean path`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errOut, code := n.tend(tc.args[0], tc.args[1:]...)
			require.Equal(t, 1, code)
			require.Contains(t, errOut, tc.want)
			require.Equal(t, before, n.snapshot(), "nothing on the node changed")
		})
	}
}

// stopServices kills the services a test's tend left running (see
// testnode.StopServices).
func stopServices(t testing.TB, stateDir string) {
	t.Helper()
	testnode.StopServices(t, stateDir)
}
