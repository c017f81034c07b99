package manifest

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	yaml3 "go.yaml.in/yaml/v3"
)

// commentedKey is a line of examples/agent.yaml that shows a field
// commented out: "  # auth:", "  #   tokenFile: /etc/tend/git-token".
var commentedKey = regexp.MustCompile(`^(\s*)# ?(\s*[A-Za-z]+:(\s.*)?)$`)

// examples/agent.yaml says it shows every field: each field of
// AgentConfig is there, set or commented out, at its place.
func TestExampleAgentConfigHasEveryField(t *testing.T) {
	data, err := os.ReadFile("../examples/agent.yaml")
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if m := commentedKey.FindStringSubmatch(l); m != nil {
			lines[i] = m[1] + m[2]
		}
	}
	var doc map[string]any
	require.NoError(t, yaml3.Unmarshal([]byte(strings.Join(lines, "\n")), &doc), "examples/agent.yaml, its commented fields uncommented")
	var missing []string
	for _, path := range fieldPaths(reflect.TypeFor[AgentConfig](), "") {
		if !hasPath(doc, strings.Split(path, ".")) {
			missing = append(missing, path)
		}
	}
	require.Empty(t, missing, "fields of AgentConfig examples/agent.yaml does not show")
}

// fieldPaths lists the dotted JSON paths of t's fields, down to those
// that are not structs (a Duration, a Rate, a list or a map is one field).
func fieldPaths(t reflect.Type, prefix string) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			out = append(out, fieldPaths(ft, prefix+name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}

func hasPath(doc map[string]any, path []string) bool {
	v, ok := doc[path[0]]
	if !ok || len(path) == 1 {
		return ok
	}
	sub, ok := v.(map[string]any)
	return ok && hasPath(sub, path[1:])
}
