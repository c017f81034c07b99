package docyaml

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// Block is one ```yaml block of a Markdown file.
type Block struct {
	File    string // the Markdown file, as given
	Line    int    // line of the block's first line in File
	Heading string // the nearest heading above it, without its #s
	Text    string
}

// Where is the block's file and line, for messages.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// Blocks returns the ```yaml (or ```yml) blocks of a Markdown document.
func Blocks(file string, md []byte) []Block {
	var out []Block
	var cur *Block
	var body strings.Builder
	heading := ""
	sc := bufio.NewScanner(bytes.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && (line == "```yaml" || line == "```yml"):
			cur = &Block{File: file, Line: n + 1, Heading: heading}
			body.Reset()
		case cur != nil && line == "```":
			cur.Text = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line + "\n")
		case strings.HasPrefix(line, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
	}
	return out
}

// fragment is the marker of a block that is part of a document: its first
// line is "# fragment of a Device" or "# fragment of an AgentConfig".
var fragment = regexp.MustCompile(`^# fragment of an? ([A-Za-z]+)\b`)

var kindLine = regexp.MustCompile(`(?m)^kind:\s*([A-Za-z]+)`)

// Kind returns the kind of the document the block is, or is a fragment
// of, and whether it is a fragment. It is "" for a block that is neither.
func (b Block) Kind() (kind string, isFragment bool) {
	if m := fragment.FindStringSubmatch(b.Text); m != nil {
		return m[1], true
	}
	if m := kindLine.FindStringSubmatch(b.Text); m != nil {
		return m[1], false
	}
	return "", false
}

// Document returns the block as a whole YAML file whose lines are those of
// the Markdown file: a fragment gets apiVersion, kind and (for a kind
// with metadata) metadata.name before it, in the lines above the block.
func (b Block) Document(name string) []byte {
	kind, isFragment := b.Kind()
	head := ""
	if isFragment {
		head = "apiVersion: tend.dev/v1alpha1\nkind: " + kind + "\n"
		if kind != "AgentConfig" {
			head += "metadata: {name: " + name + "}\n"
		}
	}
	pad := b.Line - 1 - strings.Count(head, "\n")
	if pad < 0 {
		return []byte(head + b.Text) // too close to the top to keep its lines
	}
	return []byte(head + strings.Repeat("\n", pad) + b.Text)
}
