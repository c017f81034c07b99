package manifest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/docyaml"
)

// refused lists the documentation's examples of what is planned, by file
// and heading, with the errors this tend gives them (without file and
// line): each names the field it does not read yet. Every other example
// must be valid.
var refused = map[string][]string{}

// TestDocumentationExamples loads every YAML example of README.md,
// DESIGN.md and examples/ as tend reads it. A Markdown file's Device
// examples, whole or marked "# fragment of a Device", are one device, as
// the files of a device's folder are; each AgentConfig is a config file.
func TestDocumentationExamples(t *testing.T) {
	docs := []string{"../README.md", "../DESIGN.md"}
	mds, err := filepath.Glob("../examples/*/*.md")
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, md := range append(docs, mds...) {
		data, err := os.ReadFile(md)
		require.NoError(t, err)
		var device string
		var inputs []Input
		for _, b := range docyaml.Blocks(strings.TrimPrefix(md, "../"), data) {
			key := b.File + " › " + b.Heading
			kind, fragment := b.Kind()
			if want, ok := refused[key]; ok {
				seen[key] = true
				t.Run(b.Where()+" is refused", func(t *testing.T) {
					require.Equal(t, want, errorsWithoutPlace(loadAlone(b, kind)))
				})
				continue
			}
			switch kind {
			case KindDevice:
				if !fragment && device == "" {
					device = regexp.MustCompile(`(?m)^  name: (\S+)`).FindStringSubmatch(b.Text)[1]
				}
				inputs = append(inputs, Input{Name: b.File, Data: b.Document(device)})
			case KindAgentConfig:
				t.Run(b.Where(), func(t *testing.T) { require.NoError(t, loadAlone(b, kind)) })
			case KindProfile:
				t.Run(b.Where(), func(t *testing.T) {
					fleet, err := LoadFleet([]Input{{Name: b.File, Data: b.Document("")}})
					require.NoError(t, err)
					require.Len(t, fleet.Profiles, 1)
				})
			case KindRollout:
				t.Run(b.Where(), func(t *testing.T) {
					_, err := LoadFleet([]Input{{Name: b.File, Data: b.Document("")}})
					require.NoError(t, err)
				})
			default:
				t.Errorf("%s: a yaml block that is not a tend document: start it with \"# fragment of a Device\" (or of an AgentConfig)", b.Where())
			}
			if strings.Contains(b.Heading, "(planned)") {
				t.Errorf("%s: an example under a planned heading must be listed in refused", b.Where())
			}
		}
		if len(inputs) > 0 {
			t.Run(md+" devices", func(t *testing.T) {
				_, err := LoadDevice(device, inputs, allow)
				require.NoError(t, err)
			})
		}
	}
	for key := range refused {
		require.True(t, seen[key], "no example under %s", key)
	}
}

// loadAlone loads one block as a file of its own.
func loadAlone(b docyaml.Block, kind string) error {
	doc := b.Document("cam-017")
	if kind == KindAgentConfig {
		c, err := ParseConfig(b.File, doc)
		if err != nil {
			return err
		}
		c.SetDefaults("host")
		return c.Validate()
	}
	_, err := LoadDevice("cam-017", []Input{{Name: b.File, Data: doc}}, allow)
	return err
}

var place = regexp.MustCompile(`^[^:]+:\d+: `)

func errorsWithoutPlace(err error) []string {
	if err == nil {
		return nil
	}
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = place.ReplaceAllString(l, "")
	}
	return slices.Clip(lines)
}

// TestExampleFleet loads examples/agent.yaml as the agent does and composes
// every device of examples/fleet with the fleet's profiles under its
// allowPaths, and every device of examples/containers alone; every other
// YAML file of examples/ is named here as not tend's.
func TestExampleFleet(t *testing.T) {
	c, err := LoadConfig("../examples/agent.yaml")
	require.NoError(t, err)
	c.SetDefaults("host")
	require.NoError(t, c.Validate())
	opts := ValidateOptions{AllowPaths: c.AllowPaths, CheckAllowPaths: true}
	dirs, err := filepath.Glob("../examples/fleet/devices/*")
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	profiles, err := ReadFiles([]string{"../examples/fleet/profiles"})
	require.NoError(t, err)
	// compose composes the device of folder dir with shared documents.
	compose := func(t *testing.T, dir string, labels map[string]string, shared []Input) *Composed {
		own, err := ReadFiles([]string{dir})
		require.NoError(t, err)
		for i := range own {
			own[i].PerDevice = true
		}
		c, err := Compose(append(own, shared...), ComposeOptions{Device: filepath.Base(dir), Labels: labels, ValidateOptions: opts})
		require.NoError(t, err)
		return c
	}
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			require.Len(t, compose(t, dir, c.Labels, profiles).Device.Spec.Services, 1, "the inference profile applies")
		})
	}
	// examples/containers (make demo-containers): one device, no profiles,
	// under the same allowPaths; its service is a container.
	dirs, err = filepath.Glob("../examples/containers/devices/*")
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			c := compose(t, dir, nil, nil)
			require.Len(t, c.Device.Spec.Services, 1)
			require.True(t, c.Device.Spec.Services[0].Container(), "the service runs as a container")
		})
	}
	notTend := map[string]bool{
		"../examples/prometheus/alerts.yaml": true, "../examples/ci/gitlab-ci.yml": true, "../examples/ci/github-actions.yaml": true,
	}
	err = filepath.WalkDir("../examples", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !IsManifest(filepath.Base(p)) {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		tend := strings.Contains(string(data), "apiVersion: "+APIVersion)
		checked := p == "../examples/agent.yaml" || strings.HasPrefix(p, "../examples/fleet/devices/") ||
			strings.HasPrefix(p, "../examples/fleet/profiles/") || strings.HasPrefix(p, "../examples/containers/devices/")
		switch {
		case notTend[p] && tend:
			t.Errorf("%s is a tend document: check it here", p)
		case !notTend[p] && !checked:
			t.Errorf("%s is not checked: load it here, or list it as not tend's", p)
		}
		return nil
	})
	require.NoError(t, err)
}
