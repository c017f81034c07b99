package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/feature"
)

// omittedTags are the omit tags of this build, space-separated: the end-to-end
// suite's tend binary is built with them too.
func omittedTags() string {
	var tags []string
	for _, f := range feature.All() {
		if !f.Linked {
			tags = append(tags, f.Tag)
		}
	}
	return strings.Join(tags, " ")
}

// A tend built without a feature refuses a config or manifest that asks
// for it, at validate and at agent start, naming the file, the line, the
// field and the tag. Run with the tags:
//
//	go test -tags 'tend_omit_containers tend_omit_notation tend_omit_cosign tend_omit_mqtt' ./cmd/tend/e2e -run TestOmitted
//
// In a build with every feature each case is skipped.
func TestOmittedFeatures(t *testing.T) {
	const head = "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: /srv/fleet}\n"
	for _, tc := range []struct {
		feature feature.Feature
		file    string // the file validate reads, in a temp folder
		content string
		want    string // the line validate prints, after the folder
	}{
		{feature.Containers, "device.yaml",
			"apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  services:\n    - name: web\n      image: registry.local:5000/web:1.0\n",
			"device.yaml:7: spec.services[0].image: this tend was built without containers (tag tend_omit_containers)"},
		{feature.Notation, "agent.yaml",
			head + "runtime:\n  verify:\n    notation: {trustPolicy: /etc/tend/trustpolicy.json, trustStore: /etc/tend/truststore}\n",
			"agent.yaml:6: runtime.verify.notation: this tend was built without notation (tag tend_omit_notation)"},
		{feature.Cosign, "agent.yaml",
			head + "models:\n  verify:\n    cosign: {keys: [/etc/tend/cosign.pub]}\n",
			"agent.yaml:6: models.verify.cosign: this tend was built without cosign (tag tend_omit_cosign)"},
		{feature.MQTT, "agent.yaml",
			head + "notify:\n  mqtt: {url: tcp://broker.local:1883, topic: tend/fleet/main}\n",
			"agent.yaml:5: notify.mqtt: this tend was built without mqtt (tag tend_omit_mqtt)"},
	} {
		t.Run(tc.feature.Name, func(t *testing.T) {
			if tc.feature.Linked {
				t.Skipf("this build has %s: run with -tags %s", tc.feature.Name, tc.feature.Tag)
			}
			dir := t.TempDir()
			file := filepath.Join(dir, tc.file)
			require.NoError(t, os.WriteFile(file, []byte(tc.content), 0o644))
			stdout, stderr, code := tend(t, "validate", file)
			require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.Contains(t, stdout+stderr, filepath.Join(dir, tc.want))
			if tc.file != "agent.yaml" {
				return
			}
			// The agent refuses to start on it, saying the same.
			stdout, stderr, code = tend(t, "agent", "--config", file, "--state-dir", filepath.Join(dir, "state"), "--listen", "off")
			require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.Contains(t, stderr, filepath.Join(dir, tc.want))
		})
	}
	t.Run("tend notify", func(t *testing.T) {
		if feature.MQTT.Linked {
			t.Skipf("this build has mqtt: run with -tags %s", feature.MQTT.Tag)
		}
		_, stderr, code := tend(t, "notify", "--mqtt", "tcp://127.0.0.1:1", "--topic", "tend/fleet/main")
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, "this tend was built without mqtt (tag tend_omit_mqtt)")
	})
}
