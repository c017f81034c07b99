package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// pathFlags finds the --path flags of a command line, unquoted.
var pathFlags = regexp.MustCompile(`--path\s+('[^']*'|"[^"]*"|[^\s\\]+)`)

// commandLine is a line that runs tend validate --all or tend diff: in a
// shell block, a prompt's, a workflow's run: or a GitLab script's item.
var commandLine = regexp.MustCompile(`^\s*(?:\$ |- |run: )?(tend validate --all|tend diff) --`)

// ciCommands returns the tend validate --all and tend diff command lines
// of a shipped CI example (or of the README's CI section), by command.
func ciCommands(t *testing.T, file string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	text := string(data)
	if filepath.Base(file) == "README.md" && filepath.Dir(file) == "../../.." {
		_, text, _ = strings.Cut(text, "## In CI: `tend diff`")
		text, _, _ = strings.Cut(text, "\n## ")
	}
	out := map[string][]string{}
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		m := commandLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, cmd := range []string{"tend validate --all", "tend diff"} {
			if m[1] != cmd {
				continue
			}
			for strings.HasSuffix(strings.TrimSpace(line), "\\") && i+1 < len(lines) {
				i++
				line = strings.TrimSuffix(strings.TrimSpace(line), "\\") + " " + lines[i]
			}
			if strings.Contains(line, "--path") {
				out[cmd] = append(out[cmd], line)
			}
		}
	}
	return out
}

// The validate and diff commands the shipped CI examples and the README's
// CI section run read the fleet's real source paths: on the tour's layout
// (examples/fleet: profiles/ and devices/) every device is valid with its
// profiles' resources, and a profile change is diffed.
func TestShippedCIExamplesReadProfiles(t *testing.T) {
	r := testgit.NewRepo(t)
	const fleet = "../../../examples/fleet"
	require.NoError(t, filepath.WalkDir(fleet, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(fleet, p)
		r.WriteFile(filepath.ToSlash(rel), string(data))
		return err
	}))
	r.Commit("the tour's fleet")
	profile, err := os.ReadFile(filepath.Join(fleet, "profiles/inference.yaml"))
	require.NoError(t, err)
	changed := strings.Replace(string(profile), "classes: [person, forklift]", "classes: [person, forklift, pallet]", 1)
	require.NotEqual(t, string(profile), changed)
	r.WriteFile("profiles/inference.yaml", changed)
	r.Commit("a class more")

	for _, file := range []string{"../../../examples/ci/github-actions.yaml", "../../../examples/ci/gitlab-ci.yml", "../../../examples/ci/README.md", "../../../README.md"} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			commands := ciCommands(t, file)
			require.NotEmpty(t, commands["tend validate --all"], "no tend validate --all with --path in %s", file)
			require.NotEmpty(t, commands["tend diff"], "no tend diff with --path in %s", file)
			for cmd, lines := range commands {
				for _, line := range lines {
					var flags []string
					for _, m := range pathFlags.FindAllStringSubmatch(line, -1) {
						flags = append(flags, "--path", strings.Trim(m[1], `'"`))
					}
					args := []string{"validate", "--all"}
					if cmd == "tend diff" {
						args = []string{"diff", "--base", "HEAD~1", "--head", "HEAD"}
					}
					out, errOut, code := tend(t, append(args, ciFlags(t, r.Dir(), flags...)...)...)
					if cmd == "tend diff" {
						require.Equal(t, 2, code, "%s\n%s%s", line, out, errOut)
						require.Contains(t, out, "Profiles changed:\n  profile/inference reaches 1 device: demo-01\n", line)
					} else {
						require.Equal(t, 0, code, "%s\n%s%s", line, out, errOut)
						require.Regexp(t, `valid: device demo-02 at HEAD@sha1:[0-9a-f]{40}: 1 model, 1 file, 1 service\n`, out, line)
					}
					require.NotContains(t, strings.ToLower(out), "warning", line)
				}
			}
		})
	}
}
