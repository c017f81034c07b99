package model_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/planner"
)

// blobGets counts the blob GETs the registry serves, by digest.
type blobGets struct {
	mu   sync.Mutex
	gets map[string]int
}

func countBlobGets(t *testing.T, n *modelNode) *blobGets {
	c := &blobGets{gets: map[string]int{}}
	n.reg.Use(func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			c.mu.Lock()
			c.gets[r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]]++
			c.mu.Unlock()
		}
		return false
	})
	t.Cleanup(func() { n.reg.Use(nil) })
	return c
}

// of returns how many GETs the blobs holding data had, each.
func (c *blobGets) of(data ...[]byte) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, d := range data {
		out = append(out, c.gets[testoci.Digest(d)])
	}
	return out
}

// folder lists the regular files under the model's stable path.
func (n *modelNode) folder(name string) []string {
	n.t.Helper()
	root := filepath.Join(n.Path(modelAllow), name) + "/"
	var out []string
	require.NoError(n.t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out = append(out, filepath.ToSlash(strings.TrimPrefix(p, root)))
		}
		return err
	}))
	slices.Sort(out)
	return out
}

// An ORAS artifact with a model, a dataset eight times its size and a
// tokenizer: include ["*.gguf", "tokenizer.json"] downloads the two blobs
// it selects, never the dataset's, and the folder holds only them. The
// include is part of what the folder is: a new include makes a new
// version folder, and dropping it brings the whole artifact.
func TestModelIncludeDownloadsOnlySelectedFiles(t *testing.T) {
	n := newModelNode(t)
	gguf := bytes.Repeat([]byte("q4 weights "), 50_000)      // 550 kB
	dataset := bytes.Repeat([]byte("dataset row "), 366_000) // 4.4 MB
	tokenizer := []byte(`{"vocab":{"a":1}}`)
	n.reg.PushFiles(t, "models/llm:v1", map[string][]byte{"model.gguf": gguf, "dataset.bin": dataset, "tokenizer.json": tokenizer})
	gets := countBlobGets(t, n)
	m := n.model("llm", "models/llm:v1")
	m.Include = []string{"*.gguf", "tokenizer.json"}

	cs, res := n.apply(m)
	require.Len(t, cs.Actions, 1)
	require.Contains(t, cs.Actions[0].Reason, "550.0 kB to download", reasons(cs))
	require.Equal(t, []planner.Change{
		{Field: planner.FieldDigest, To: cs.Actions[0].Changes[0].To},
		{Field: planner.FieldInclude, To: `["*.gguf", "tokenizer.json"]`},
	}, cs.Actions[0].Changes)
	require.Equal(t, []int{1, 1, 0}, gets.of(gguf, tokenizer, dataset))
	require.Less(t, res.Downloaded, int64(len(dataset)))
	require.Equal(t, []string{"model.gguf", "tokenizer.json"}, n.folder("llm"))
	require.Equal(t, string(tokenizer), n.read("llm", "tokenizer.json"))
	cs, _ = n.apply(m)
	require.True(t, cs.Empty(), reasons(cs))

	// Another include: a new folder, from the blobs already stored.
	before := n.target("llm")
	m.Include = []string{"**/*.gguf"}
	cs, _ = n.apply(m)
	require.Len(t, cs.Actions, 1, reasons(cs))
	require.Equal(t, planner.Update, cs.Actions[0].Type)
	require.Contains(t, cs.Actions[0].Reason, `(include ["**/*.gguf"]), nothing to download`, reasons(cs))
	require.NotEqual(t, before, n.target("llm"))
	require.Equal(t, []string{"model.gguf"}, n.folder("llm"))
	require.Equal(t, []int{1, 1, 0}, gets.of(gguf, tokenizer, dataset))
	cs, _ = n.apply(m)
	require.True(t, cs.Empty(), reasons(cs))

	// No include: every file, the dataset downloaded now.
	m.Include = nil
	cs, _ = n.apply(m)
	require.Len(t, cs.Actions, 1, reasons(cs))
	require.Contains(t, cs.Actions[0].Reason, "(include (all files)), 4.4 MB to download", reasons(cs))
	require.Equal(t, []string{"dataset.bin", "model.gguf", "tokenizer.json"}, n.folder("llm"))
	require.Equal(t, []int{1, 1, 1}, gets.of(gguf, tokenizer, dataset))
	cs, _ = n.apply(m)
	require.True(t, cs.Empty(), reasons(cs))
}

// An include that matches no file fails the tick before anything is
// downloaded, naming the pattern and listing the artifact's files; the
// version active stays.
func TestModelIncludeMatchingNothing(t *testing.T) {
	n := newModelNode(t)
	n.reg.PushFiles(t, "models/llm:v1", map[string][]byte{"model.gguf": []byte("w"), "tokenizer.json": []byte("{}")})
	m := n.model("llm", "models/llm:v1")
	n.apply(m)
	gets := countBlobGets(t, n)

	m.Include = []string{"*.gguf", "*.safetensors"}
	_, _, _, err := n.tick(true, m)
	require.Error(t, err)
	require.ErrorIs(t, err, modelkit.ErrIncludeMatchesNothing)
	require.ErrorContains(t, err, `model/llm: include "*.safetensors" matches no file of the model sha256:`)
	require.ErrorContains(t, err, "it holds model.gguf, tokenizer.json")
	require.Equal(t, []string{"model.gguf", "tokenizer.json"}, n.folder("llm"))
	gets.mu.Lock()
	require.Empty(t, gets.gets)
	gets.mu.Unlock()
}

// A tar layer's names are known once it is downloaded: a ModelKit whose
// tar layers hold a model, a dataset and docs is downloaded whole, and
// only the entries the include selects are unpacked (the Kitfile only
// when a pattern selects it, as kit unpack --filter). An include that matches nothing in
// any layer fails then, listing what the layers held.
func TestModelIncludeUnpacksOnlySelectedTarEntries(t *testing.T) {
	n := newModelNode(t)
	const kit = "application/vnd.kitops.modelkit."
	_, err := testoci.PushArtifact(n.reg.Host, "models/kit:v1", "", kit+"config.v1+json",
		[]byte(`{"manifestVersion":"1.0.0","package":{"name":"kit"},"model":{"name":"kit","path":"weights"}}`),
		[]testoci.Layer{
			{MediaType: kit + "model.v1.tar", Data: tarOf(t, "weights/q4.gguf", "q4", "weights/q8.gguf", "q8", "weights/notes.md", "n")},
			{MediaType: kit + "dataset.v1.tar", Data: tarOf(t, "data/train.bin", "rows")},
		})
	require.NoError(t, err)
	m := n.model("kit", "models/kit:v1")
	m.Include = []string{"weights/q4.gguf"}
	n.apply(m)
	require.Equal(t, []string{"weights/q4.gguf"}, n.folder("kit"))
	require.Equal(t, "q4", n.read("kit", "weights/q4.gguf"))
	cs, _ := n.apply(m)
	require.True(t, cs.Empty(), reasons(cs))

	m.Include = []string{"weights", modelkit.KitfileName} // a folder takes all it holds
	n.apply(m)
	require.Equal(t, []string{modelkit.KitfileName, "weights/notes.md", "weights/q4.gguf", "weights/q8.gguf"}, n.folder("kit"))

	m.Include = []string{"**/*.safetensors"}
	_, _, _, err = n.tick(true, m)
	require.ErrorIs(t, err, modelkit.ErrIncludeMatchesNothing)
	require.ErrorContains(t, err, `include "**/*.safetensors" matches no file`)
	require.ErrorContains(t, err, "data/train.bin")
	require.ErrorContains(t, err, "weights/q4.gguf")
	require.Equal(t, []string{modelkit.KitfileName, "weights/notes.md", "weights/q4.gguf", "weights/q8.gguf"}, n.folder("kit"),
		"the version before stays active")
}

// A KitOps or ModelPack tar layer says what path it holds (the Kitfile
// entry it belongs to; the filepath annotation), so include ["*.gguf"]
// downloads the model layer and never the dataset's, as
// kit unpack --filter=model and modctl fetch --patterns do.
func TestModelIncludeSkipsTarLayersByDeclaredPath(t *testing.T) {
	model := tarOf(t, "model.gguf", strings.Repeat("q4", 10_000))
	dataset := tarOf(t, "data/train.bin", strings.Repeat("row\n", 100_000), "data/test.bin", "row\n")
	for _, tt := range []struct {
		name, configType string
		config           []byte
		layers           []testoci.Layer
		folder           []string
	}{
		// KitOps (kitops-ml/kitops pkg/lib/constants/mediaType.go): config
		// application/vnd.kitops.modelkit.config.v1+json (the Kitfile as
		// JSON, each entry with its layer's digest), layers
		// application/vnd.kitops.modelkit.<model|dataset|…>.v1.tar, whose
		// names carry the entry's path.
		{"KitOps", kitMedia + "config.v1+json",
			[]byte(`{"manifestVersion":"1.0.0","package":{"name":"kit"},"model":{"name":"kit","path":"model.gguf","digest":"` + testoci.Digest(model) + `"},` +
				`"datasets":[{"name":"train","path":"./data","digest":"` + testoci.Digest(dataset) + `"}]}`),
			[]testoci.Layer{{MediaType: kitMedia + "model.v1.tar", Data: model}, {MediaType: kitMedia + "dataset.v1.tar", Data: dataset}},
			[]string{"model.gguf"}}, // no Kitfile: no pattern selects it, as kit unpack --filter
		// ModelPack (CNCF model-spec specs-go/v1/mediatype.go and
		// annotations.go): config application/vnd.cncf.model.config.v1+json,
		// layers application/vnd.cncf.model.<weight|dataset|…>.v1.tar, each
		// with the path it holds in org.cncf.model.filepath.
		{"ModelPack", "application/vnd.cncf.model.config.v1+json",
			[]byte(`{"descriptor":{"name":"kit"},"config":{"format":"gguf"},"modelfs":{"type":"layers","diffIds":[]}}`),
			[]testoci.Layer{
				{MediaType: "application/vnd.cncf.model.weight.v1.tar", Data: model, Annotations: map[string]string{"org.cncf.model.filepath": "model.gguf"}},
				{MediaType: "application/vnd.cncf.model.dataset.v1.tar", Data: dataset, Annotations: map[string]string{"org.cncf.model.filepath": "data"}},
			},
			[]string{"model.gguf"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newModelNode(t)
			_, err := testoci.PushArtifact(n.reg.Host, "models/kit:v1", "", tt.configType, tt.config, tt.layers)
			require.NoError(t, err)
			gets := countBlobGets(t, n)
			m := n.model("kit", "models/kit:v1")
			m.Include = []string{"*.gguf"}
			cs, _ := n.apply(m)
			require.Contains(t, cs.Actions[0].Reason, printable.HumanBytes(int64(len(model)))+" to download", reasons(cs))
			require.Equal(t, []int{1, 0}, gets.of(model, dataset))
			require.Equal(t, tt.folder, n.folder("kit"))

			// A pattern no declared path can hold fails before any download.
			m.Include = []string{"*.safetensors"}
			_, _, _, err = n.tick(true, m)
			require.ErrorIs(t, err, modelkit.ErrIncludeMatchesNothing)
			require.ErrorContains(t, err, "it holds model.gguf/…, data/…")
			require.Equal(t, []int{1, 0}, gets.of(model, dataset))

			m.Include = []string{"data/*.bin"}
			n.apply(m)
			require.Equal(t, []int{1, 1}, gets.of(model, dataset))
		})
	}
}

// kitMedia is the prefix of KitOps media types.
const kitMedia = "application/vnd.kitops.modelkit."
