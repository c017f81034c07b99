package manifest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSensitiveFile(t *testing.T) {
	header := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  files:\n"
	load := func(t *testing.T, files string) (*Device, error) {
		t.Helper()
		d, err := Load("cam-017", []Input{{Name: "d.yaml", Data: []byte(header + files)}})
		if err == nil {
			err = d.Validate(allow)
		}
		return d, err
	}
	t.Run("is read", func(t *testing.T) {
		d, err := load(t, "    - {path: /etc/infer/key, content: hunter2, mode: \"0600\", sensitive: true}\n    - {path: /etc/infer/a, content: x}\n")
		require.NoError(t, err)
		require.True(t, d.Spec.Files[0].Sensitive)
		require.False(t, d.Spec.Files[1].Sensitive)
	})
	t.Run("must be a boolean", func(t *testing.T) {
		_, err := load(t, "    - {path: /etc/infer/key, content: x, sensitive: yes}\n")
		require.ErrorContains(t, err, `d.yaml:6: spec.files[0].sensitive: must be true or false, got "yes"`)
	})
	t.Run("errors about the file never quote its content", func(t *testing.T) {
		for _, f := range []string{
			"    - {path: /etc/infer/key, content: [hunter2], sensitive: true}\n",
			"    - {path: /etc/infer/key, content: hunter2, sensitive: true, mode: \"99\"}\n",
			"    - {path: etc/infer/key, content: hunter2, sensitive: true}\n",
		} {
			_, err := load(t, f)
			require.Error(t, err)
			require.NotContains(t, err.Error(), "hunter2")
		}
	})
}
