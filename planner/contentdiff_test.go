package planner

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
)

var planOpts = DiffOptions{From: "node", To: "declared"}

func text(s string) Content { return Content{Data: []byte(s), Size: int64(len(s))} }

// update plans one declared resource against what the node has, as the
// agent does, so the diff is made from a real action.
func update(t *testing.T, want, have Resource) Action {
	t.Helper()
	cs, err := Plan(Desired{Resources: []Resource{want}}, Observed{
		Resources: map[string]State{want.ID: present(have)},
		Applied:   map[string][]Field{want.ID: have.Fields},
	}, Options{})
	require.NoError(t, err)
	require.Len(t, cs.Actions, 1)
	return cs.Actions[0]
}

func TestContentDiff(t *testing.T) {
	cfg := file("/etc/infer/config.yaml", "sha256:"+strings.Repeat("a", 64), "0644")
	cfg2 := file("/etc/infer/config.yaml", "sha256:"+strings.Repeat("b", 64), "0644")
	mode := file("/etc/infer/config.yaml", "sha256:"+strings.Repeat("a", 64), "0600")
	secret := cfg2
	secret.Sensitive = true
	long := func(n int, v string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "line %d %s\n", i, v)
		}
		return b.String()
	}
	tests := []struct {
		name           string
		want, have     Resource
		before, after  Content
		maxLines       int
		contains, hide []string
		exact          string
	}{
		{
			name: "a text file is a unified diff of node against declaration",
			want: cfg2, have: cfg,
			before: text("threshold: 0.4\nclasses: 80\n"), after: text("threshold: 0.5\nclasses: 80\n"),
			exact: "--- /etc/infer/config.yaml (node)\n+++ /etc/infer/config.yaml (declared)\n" +
				"@@ -1,2 +1,2 @@\n-threshold: 0.4\n+threshold: 0.5\n classes: 80\n",
		},
		{
			name: "content with a NUL byte is binary",
			want: cfg2, have: cfg,
			before: text("a\x00b"), after: text("a\x00c!"),
			exact: "binary content differs (3 bytes → 4 bytes)\n",
		},
		{
			name: "content that is not UTF-8 is binary",
			want: cfg2, have: cfg,
			before: text("ok\n"), after: text("\xff\xfe\n"),
			exact: "binary content differs (3 bytes → 3 bytes)\n",
		},
		{
			name: "a sensitive file shows sizes and digests, never its content",
			want: secret, have: cfg,
			before: text("password: hunter2\n"), after: text("password: correct horse\n"),
			exact: SensitiveHidden + " 18 bytes → 24 bytes, sha256:aaaaaaaaaaaa → sha256:bbbbbbbbbbbb\n",
			hide:  []string{"hunter2", "horse"},
		},
		{
			name: "content sensitive at base is hidden too",
			want: cfg2, have: cfg,
			before: Content{Data: []byte("k: 1\n"), Size: 5, Sensitive: true}, after: text("k: 2\n"),
			contains: []string{SensitiveHidden}, hide: []string{"k: 1", "k: 2"},
		},
		{
			name: "a long diff is cut and says how much was left out",
			want: cfg2, have: cfg,
			before: text(long(50, "old")), after: text(long(50, "new")), maxLines: 10,
			contains: []string{"-line 0 old", "… 93 more lines of diff left out"}, hide: []string{"line 49"},
		},
		{
			name: "content too large to read whole is described by its sizes",
			want: cfg2, have: cfg,
			before: Content{Data: []byte("abc"), Size: MaxDiffBytes + 1}, after: text("abd"),
			exact: "content differs (1048577 bytes → 3 bytes; larger than 1048576 bytes, not diffed line by line)\n",
		},
		{
			name: "a mode change is a field line, with no content diff when content is the same",
			want: mode, have: cfg,
			before: text("same\n"), after: text("same\n"),
			exact: "mode: 0644 → 0600\n",
		},
		{
			name: "control characters in content are shown escaped",
			want: cfg2, have: cfg,
			before: text("a\n"), after: text("a\x1b[2J\r\n"),
			contains: []string{`+a\x1b[2J\x0d`}, hide: []string{"\x1b", "\r"},
		},
		{
			name:   "a model's include prints once, from its described fields",
			want:   Resource{ID: "model/llm", Kind: KindModel, Fields: []Field{{FieldDigest, "sha256:" + strings.Repeat("a", 64)}, {FieldInclude, `["*.gguf"]`}}},
			have:   Resource{ID: "model/llm", Kind: KindModel, Fields: []Field{{FieldDigest, "sha256:" + strings.Repeat("a", 64)}, {FieldInclude, `["*.gguf", "tokenizer.json"]`}}},
			before: Content{Fields: []Field{{"ref", "r/llm:v1"}, {"include", `["*.gguf", "tokenizer.json"]`}}},
			after:  Content{Fields: []Field{{"ref", "r/llm:v1"}, {"include", `["*.gguf"]`}}},
			exact:  "include: [\"*.gguf\", \"tokenizer.json\"] → [\"*.gguf\"]\n",
		},
		{
			name:   "spec fields print old and new values",
			want:   Resource{ID: "service/infer", Kind: KindService, Fields: []Field{{FieldSpec, "s2"}, {FieldReplicas, "1"}}},
			have:   Resource{ID: "service/infer", Kind: KindService, Fields: []Field{{FieldSpec, "s1"}, {FieldReplicas, "2"}}},
			before: Content{Fields: []Field{{"command", `["/bin/server","--fast"]`}, {"env.LOG_LEVEL", "info"}, {"env.OLD", "1"}}},
			after:  Content{Fields: []Field{{"command", `["/bin/server"]`}, {"env.LOG_LEVEL", "debug"}, {"env.NEW", "2"}}},
			exact: "replicas: 2 → 1\ncommand: [\"/bin/server\",\"--fast\"] → [\"/bin/server\"]\n" +
				"env.LOG_LEVEL: info → debug\nenv.NEW: (none) → 2\nenv.OLD: 1 → (none)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := update(t, tt.want, tt.have)
			opts := planOpts
			opts.MaxLines = tt.maxLines
			got := ContentDiff(a, tt.before, tt.after, opts)
			if tt.exact != "" {
				require.Equal(t, tt.exact, got)
			}
			for _, s := range tt.contains {
				require.Contains(t, got, s)
			}
			for _, s := range tt.hide {
				require.NotContains(t, got, s)
			}
		})
	}
}

// A plan with diffs prints each under its action, in text and in JSON;
// creates and restarts carry none.
func TestPlanWithDiffGolden(t *testing.T) {
	cfg := file("/etc/infer/config.yaml", "sha256:"+strings.Repeat("a", 64), "0644")
	cfg2 := file("/etc/infer/config.yaml", "sha256:"+strings.Repeat("b", 64), "0644")
	key := file("/etc/infer/key.pem", "sha256:"+strings.Repeat("c", 64), "0600")
	key2 := file("/etc/infer/key.pem", "sha256:"+strings.Repeat("d", 64), "0600")
	key2.Sensitive = true
	svc := Resource{ID: "service/infer", Kind: KindService, Fields: []Field{{FieldSpec, "s1"}}, Deps: []string{cfg.ID}}
	added := file("/etc/infer/new.yaml", "sha256:ee", "0644")
	// A service that was a process and is now a container: its image is
	// named once, by ref, and its digest as image.digest.
	web := Resource{ID: "service/web", Kind: KindService, Fields: []Field{{FieldSpec, "p1"}, {FieldReplicas, "1"}}}
	digest := "sha256:" + strings.Repeat("f", 64)
	web2 := Resource{ID: "service/web", Kind: KindService, Fields: []Field{{FieldSpec, "c1"}, {FieldImage, digest}, {FieldReplicas, "1"}}}
	cs, err := Plan(Desired{Device: "cam-017", Revision: "main@sha1:0123", Resources: []Resource{cfg2, key2, svc, added, web2}}, Observed{
		Resources: map[string]State{cfg.ID: present(cfg), key.ID: present(key), svc.ID: present(svc), web.ID: present(web)},
		Applied:   map[string][]Field{cfg.ID: cfg.Fields, key.ID: key.Fields, svc.ID: svc.Fields, web.ID: web.Fields},
	}, Options{})
	require.NoError(t, err)
	sides := map[string][2]Content{
		cfg.ID: {text("threshold: 0.4\n"), text("threshold: 0.5\n")},
		key.ID: {text("-----BEGIN KEY-----\nold\n"), text("-----BEGIN KEY-----\nnew\n")},
		web.ID: {
			Content{Fields: []Field{{"command", `["/opt/web/server"]`}, {"restart", "always"}}},
			Content{Fields: []Field{{"image", "registry.local:5000/web:v2"}, {"image.digest", digest}, {"network", "host"}, {"restart", "always"}}},
		},
	}
	cs.AddDiffs(func(a Action) (Content, Content, bool) {
		s, ok := sides[a.Resource]
		return s[0], s[1], ok
	}, planOpts)
	var txt, js bytes.Buffer
	require.NoError(t, WriteText(&txt, cs))
	require.NoError(t, WriteJSON(&js, cs))
	for _, out := range []string{txt.String(), js.String()} {
		require.NotContains(t, out, "BEGIN KEY")
	}
	golden.Assert(t, "diff.txt.golden", txt.Bytes())
	golden.Assert(t, "diff.json.golden", js.Bytes())
}
