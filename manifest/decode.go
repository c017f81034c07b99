package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	yaml2 "go.yaml.in/yaml/v2"
	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// document is one YAML document of a file, checked against its Go type.
type document struct {
	file  string
	line  int
	lines map[string]int // field path → line
}

// splitDocuments reads every non-empty document of a file. A syntax error
// ends the file: YAML cannot resume after one.
func splitDocuments(file string, data []byte) ([]*yaml3.Node, error) {
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	var docs []*yaml3.Node
	for {
		var n yaml3.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return docs, syntaxError(file, data, err)
		}
		if len(n.Content) == 0 || n.Content[0].Tag == "!!null" {
			continue // an empty document, e.g. a trailing ---
		}
		docs = append(docs, &n)
	}
}

var yamlLine = lazyRegexp(`^yaml: line (\d+): (.*)$`)

// syntaxError says where data, the file's text, stops being YAML: at the
// first line indented with a tab, or at the line of the problem.
func syntaxError(file string, data []byte, err error) *Error {
	msg := err.Error()
	m := yamlLine().FindStringSubmatch(msg)
	if m == nil {
		return &Error{File: file, Msg: "malformed YAML: " + strings.TrimPrefix(msg, "yaml: ")}
	}
	line, _ := strconv.Atoi(m[1])
	if tab := tabIndent(data, line); tab > 0 {
		return &Error{File: file, Line: tab, Msg: "tabs are not allowed in YAML indentation; use spaces"}
	}
	msg = m[2]
	if msg == "did not find expected key" || msg == "did not find expected '-' indicator" {
		// yaml.v3 names the line of the block the problem is in (a
		// parent); yaml.v2 the line of the entry that breaks it.
		if l := problemLine(data); l > line {
			line = l
		}
		msg += ": check this line's indentation against the lines of its block"
	}
	return &Error{File: file, Line: line, Msg: "malformed YAML: " + msg}
}

// tabIndent returns the first line up to line whose indentation holds a
// tab, or 0.
func tabIndent(data []byte, line int) int {
	for i, l := range strings.SplitN(string(data), "\n", line+1) {
		if i == line {
			break
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if strings.Contains(indent, "\t") {
			return i + 1
		}
	}
	return 0
}

// problemLine returns the line yaml.v2 stops at in data, or 0. Its parser
// counts lines from 0.
func problemLine(data []byte) int {
	dec := yaml2.NewDecoder(bytes.NewReader(data))
	for {
		var v struct{} // nothing decoded: aliases are never expanded
		err := dec.Decode(&v)
		var typeErr *yaml2.TypeError
		if err == nil || errors.As(err, &typeErr) {
			continue
		}
		if m := yamlLine().FindStringSubmatch(err.Error()); m != nil {
			l, _ := strconv.Atoi(m[1])
			return l + 1
		}
		return 0
	}
}

// decodeDocument checks a document node against the Go type of out, records
// the line of every field, and decodes it into out strictly.
func decodeDocument(file string, size int, doc *yaml3.Node, out any) (*document, Errors) {
	root := doc.Content[0]
	d := &document{file: file, line: root.Line, lines: map[string]int{}}
	var errs Errors
	if root.Kind != yaml3.MappingNode {
		errs.add(file, root.Line, "", "a document must be a mapping with apiVersion, kind, metadata and spec")
		return d, errs
	}
	w := walker{file: file, lines: d.lines, errs: &errs, nodes: new(int), bytes: new(int), maxBytes: maxExpansion(size)}
	value := w.walk(root, reflect.TypeOf(out).Elem(), "")
	if len(errs) > 0 {
		return d, errs
	}
	js, err := json.Marshal(value)
	if err == nil {
		err = yaml.UnmarshalStrict(js, out)
	}
	if err != nil {
		errs.add(file, root.Line, "", "%v", err)
	}
	return d, errs
}

// walker builds a JSON value from a YAML node, shaped by a Go type: it
// reports unknown fields and values of the wrong type with their line, and
// takes a scalar's literal text where a string is expected (so mode: 0644
// stays "0644" and cpu: 2 is "2").
type walker struct {
	file  string
	lines map[string]int
	errs  *Errors
	nodes *int // nodes visited so far, aliases expanded
	bytes *int // scalar bytes visited so far, aliases expanded
	// maxBytes bounds bytes: aliases of one large string multiply bytes,
	// not nodes.
	maxBytes int
}

// maxExpansion is the most scalar bytes a document of a file of size
// bytes may expand to through aliases: a few times the file, so that
// ordinary anchors (a shared env block) pass and 1,000 aliases of a
// 500 KB string do not.
func maxExpansion(size int) int { return 4*size + 64<<10 }

// maxNodes bounds the nodes one document may expand to, so a few aliases
// cannot make a small file take gigabytes (a "billion laughs" document).
const maxNodes = 100_000

// coreTags are the YAML tags a manifest may use; others (!!binary,
// !!timestamp, custom tags) would be read as plain text.
var coreTags = map[string]bool{"!!str": true, "!!int": true, "!!float": true, "!!bool": true, "!!null": true, "!!map": true, "!!seq": true}

var (
	durationType = reflect.TypeOf(Duration(0))
	rateType     = reflect.TypeOf(Rate{})
)

func (w walker) walk(n *yaml3.Node, t reflect.Type, path string) any {
	if n.Kind == yaml3.AliasNode {
		n = n.Alias
	}
	if *w.nodes++; *w.nodes > maxNodes {
		if *w.nodes == maxNodes+1 {
			w.errs.add(w.file, n.Line, path, "the document expands to more than %d nodes (aliases included); split it or drop the aliases", maxNodes)
		}
		return nil
	}
	if *w.bytes += len(n.Value); *w.bytes > w.maxBytes {
		if *w.bytes-len(n.Value) <= w.maxBytes {
			w.errs.add(w.file, n.Line, path, "the document expands to more than %d bytes through aliases (4 times its file and 64 KiB); split it or drop the aliases", w.maxBytes)
		}
		return nil
	}
	if n.Tag != "" && !coreTags[n.Tag] {
		w.errs.add(w.file, n.Line, path, "YAML tag %s is not supported: write the value as plain YAML", n.Tag)
		return nil
	}
	if path != "" {
		if _, seen := w.lines[path]; !seen {
			w.lines[path] = n.Line
		}
	}
	null := n.Kind == yaml3.ScalarNode && n.Tag == "!!null"
	if t.Kind() == reflect.Pointer {
		if null {
			return nil
		}
		t = t.Elem()
	}
	switch {
	case t == durationType:
		if n.Kind != yaml3.ScalarNode || null {
			return w.wrong(n, path, `a duration like "30s"`)
		}
		if v, err := time.ParseDuration(n.Value); err != nil || v < 0 {
			w.errs.add(w.file, n.Line, path, "invalid duration %q: use Go syntax like \"30s\" or \"5m\"", n.Value)
		}
		return n.Value
	case t == rateType:
		// Checked here for its line; decoded by Rate's UnmarshalJSON.
		if n.Kind != yaml3.ScalarNode || null {
			return w.wrong(n, path, "a string")
		}
		if n.Value != "" {
			if _, err := ParseRate(n.Value); err != nil {
				w.errs.add(w.file, n.Line, path, "%v", err)
			}
		}
		return n.Value
	case t.Kind() == reflect.String, t.Kind() == reflect.Int, t.Kind() == reflect.Bool:
		return w.scalar(n, t, path, null)
	case null && (t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Struct):
		return nil
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml3.SequenceNode {
			return w.wrong(n, path, "a list")
		}
		out := make([]any, len(n.Content))
		for i, item := range n.Content {
			out[i] = w.walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
		return out
	case t.Kind() == reflect.Map:
		if n.Kind != yaml3.MappingNode {
			return w.wrong(n, path, "a mapping")
		}
		out := map[string]any{}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i]
			if !w.newKey(seen, key, path) {
				continue
			}
			out[key.Value] = w.walk(n.Content[i+1], t.Elem(), join(path, key.Value))
		}
		return out
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml3.MappingNode {
			return w.wrong(n, path, "a mapping")
		}
		return w.walkStruct(n, t, path)
	}
	return w.wrong(n, path, t.String())
}

// scalar reads a string, an integer or a boolean.
func (w walker) scalar(n *yaml3.Node, t reflect.Type, path string, null bool) any {
	switch t.Kind() {
	case reflect.String:
		if n.Kind != yaml3.ScalarNode || null {
			return w.wrong(n, path, "a string")
		}
		return n.Value
	case reflect.Int:
		if n.Kind != yaml3.ScalarNode || n.Tag != "!!int" {
			return w.wrong(n, path, "an integer")
		}
		v, err := strconv.ParseInt(n.Value, 0, 64)
		if err != nil {
			return w.wrong(n, path, "an integer")
		}
		return v
	default:
		if n.Kind != yaml3.ScalarNode || n.Tag != "!!bool" {
			return w.wrong(n, path, "true or false")
		}
		return n.Value == "true"
	}
}

func (w walker) walkStruct(n *yaml3.Node, t reflect.Type, path string) any {
	fields := jsonFields(t)
	out := map[string]any{}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if !w.newKey(seen, key, path) {
			continue
		}
		ft, ok := fields[key.Value]
		if !ok {
			msg := fmt.Sprintf("unknown field %q", key.Value)
			if what, planned := plannedFields[t.Name()+"."+key.Value]; planned {
				msg += fmt.Sprintf(": %s are planned and not supported by this tend yet", what)
			}
			for name := range fields {
				if strings.EqualFold(name, key.Value) {
					msg += fmt.Sprintf(" (did you mean %q?)", name)
				}
			}
			w.errs.add(w.file, key.Line, path, "%s", msg)
			continue
		}
		w.lines[join(path, key.Value)] = key.Line
		out[key.Value] = w.walk(val, ft, join(path, key.Value))
	}
	return out
}

// newKey reports whether key is new in its mapping; a repeated key is an
// error (YAML forbids it, and silently keeping the last one could drop
// resources), and so is a merge key.
func (w walker) newKey(seen map[string]int, key *yaml3.Node, path string) bool {
	if key.Tag == "!!merge" || key.Value == "<<" {
		w.errs.add(w.file, key.Line, path, "YAML merge keys (<<) are not supported: repeat the fields instead")
		return false
	}
	if first, dup := seen[key.Value]; dup {
		w.errs.add(w.file, key.Line, path, "duplicate key %q (first at line %d)", key.Value, first)
		return false
	}
	seen[key.Value] = key.Line
	return true
}

func (w walker) wrong(n *yaml3.Node, path, want string) any {
	got := map[yaml3.Kind]string{yaml3.MappingNode: "a mapping", yaml3.SequenceNode: "a list"}[n.Kind]
	if got == "" {
		got = fmt.Sprintf("%q", n.Value)
		if n.Tag == "!!null" {
			got = "nothing"
		}
	}
	w.errs.add(w.file, n.Line, path, "must be %s, got %s", want, got)
	return nil
}

// jsonFields maps the JSON names of t's exported fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		out[name] = f.Type
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// header reads apiVersion and kind of a mapping document without decoding it.
func header(doc *yaml3.Node) (apiVersion, kind string, line int) {
	root := doc.Content[0]
	line = root.Line
	if root.Kind != yaml3.MappingNode {
		return "", "", line
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "apiVersion":
			apiVersion = root.Content[i+1].Value
		case "kind":
			kind = root.Content[i+1].Value
		}
	}
	return apiVersion, kind, line
}

// lazyRegexp compiles expr at its first use rather than at init: a
// command that validates nothing (tend version) compiles none of them.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
