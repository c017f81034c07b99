package manifest

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

func sortProvenance(ps []Provenance) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].ID < ps[j].ID })
}

// WriteExplain writes where everything of the composed device came from:
// its labels, the layers in the order they applied, then one line per
// resource and per variable with the layer it came from and the layers
// it overrode, and the warnings.
func (c *Composed) WriteExplain(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "device %s\n\nlabels:\n", c.Device.Metadata.Name)
	if len(c.Labels) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, l := range c.Labels {
		fmt.Fprintf(&b, "  %s=%s  from %s", l.Key, l.Value, l.From)
		if l.Overridden {
			fmt.Fprintf(&b, "; overrides %s=%s of the agent config", l.Key, l.ConfigValue)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nlayers, in order:\n")
	for i, l := range c.Layers {
		prio := ""
		if l.Kind == KindProfile {
			prio = fmt.Sprintf("  priority %d", l.Priority)
		}
		fmt.Fprintf(&b, "  %d. %s%s  (%s:%d)\n", i+1, l.ID(), prio, l.File, l.Line)
	}
	writeProvenance(&b, "resources", c.Resources)
	writeProvenance(&b, "vars", c.Vars)
	if len(c.Warnings) > 0 {
		b.WriteString("\nwarnings:\n")
		for _, w := range c.Warnings {
			fmt.Fprintf(&b, "  %s\n", w)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeProvenance(b *strings.Builder, title string, ps []Provenance) {
	fmt.Fprintf(b, "\n%s:\n", title)
	if len(ps) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, p := range ps {
		verb := "from"
		if p.Removed {
			verb = "removed by"
		}
		fmt.Fprintf(b, "  %s  %s %s", p.ID, verb, p.From)
		if len(p.Overrode) > 0 {
			// the latest first: what this layer replaced, then what that replaced
			var srcs []string
			for i := len(p.Overrode) - 1; i >= 0; i-- {
				srcs = append(srcs, p.Overrode[i].String())
			}
			what := "overrides"
			if p.Removed {
				what = "was from"
			}
			fmt.Fprintf(b, "; %s %s", what, strings.Join(srcs, ", "))
		}
		b.WriteString("\n")
	}
}
