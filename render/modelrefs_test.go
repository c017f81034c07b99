package render_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/render"
)

// ${model:NAME}/FILE names a file the model's folder holds: one its
// include selects (by the patterns alone when the artifact was not read)
// and, when the resolver read the artifact's files, one of them. An error
// names the reference, where it is, the include and what to do.
func TestModelFileReferencesAreCheckedAgainstTheInclude(t *testing.T) {
	reg := testoci.Start(t)
	reg.PushFiles(t, "models/llm:v1", map[string][]byte{"q4.gguf": []byte("q4"), "tokenizer.json": []byte("{}"), "data.bin": []byte("d")})
	doc := func(include, command string) []manifest.Input {
		return []manifest.Input{{Name: "devices/cam-017/device.yaml", Data: []byte(`apiVersion: tend.dev/v1alpha1
kind: Device
metadata: {name: cam-017}
spec:
  models:
    - name: llm
      ref: ` + reg.Ref("models/llm:v1") + `
      include: ` + include + `
  services:
    - name: infer
      command:
        - /usr/bin/llama-server
        - ` + command + `
      env:
        TOKENIZER: ${model:llm}/tokenizer.json
`)}}
	}
	render1 := func(in []manifest.Input, resolver render.Resolver) error {
		t.Helper()
		dev, err := manifest.LoadDevice("cam-017", in, manifest.ValidateOptions{})
		require.NoError(t, err)
		_, err = render.Render(context.Background(), dev, "rev1", render.Options{Resolver: resolver})
		return err
	}
	registry := func() render.Resolver {
		return &render.Registry{Options: transport.Options{Insecure: []string{reg.Host}}}
	}

	ok := doc(`["*.gguf", "tokenizer.json"]`, "--model=${model:llm}/q4.gguf")
	require.NoError(t, render1(ok, render.Declared{}))
	require.NoError(t, render1(ok, registry()))
	require.NoError(t, render1(doc(`["weights/q4.gguf", "tokenizer.json"]`, "${model:llm}/weights"), render.Declared{}), "a folder the include may fill")
	require.NoError(t, render1(doc(`["*.gguf", "tokenizer.json"]`, "${model:llm}/*.gguf"), render.Declared{}), "a shell pattern is not checked")
	require.NoError(t, render1(doc(`["*.gguf", "tokenizer.json"]`, "${model:llm}/../other/x.bin"), render.Declared{}), "nor a path out of the folder")

	for _, resolver := range []render.Resolver{render.Declared{}, registry()} {
		err := render1(doc(`["*.gguf"]`, "--model=${model:llm}/q4.gguf"), resolver)
		require.ErrorIs(t, err, render.ErrModelFileNotIncluded)
		require.EqualError(t, err, `service/infer (devices/cam-017/device.yaml:15 spec.services[0].env.TOKENIZER): ${model:llm}/tokenizer.json: `+
			`references a file the model's folder will not hold: model llm's include ["*.gguf"] selects no tokenizer.json; `+
			`add "tokenizer.json" to the model's include, or reference a file it selects`)
	}

	// The artifact's files are known: a selected name it does not have.
	in := doc(`["*.gguf", "tokenizer.json"]`, "--model=${model:llm}/q8.gguf")
	require.NoError(t, render1(in, render.Declared{}), "by the patterns alone it may be there")
	err := render1(in, registry())
	require.ErrorIs(t, err, render.ErrModelFileNotIncluded)
	require.ErrorContains(t, err, "service/infer (devices/cam-017/device.yaml:13 spec.services[0].command[1]): ${model:llm}/q8.gguf: ")
	require.ErrorContains(t, err, `q8.gguf is not a file of model llm (sha256:`)
	require.ErrorContains(t, err, `which holds q4.gguf, tokenizer.json with include ["*.gguf", "tokenizer.json"]; fix the path, or the model's ref`)

	// Without an include every file is there.
	require.NoError(t, render1(doc(`[]`, "${model:llm}/anything.bin"), registry()))
}
