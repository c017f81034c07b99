package diff

import (
	"fmt"
	"io"
	"strings"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/planner"
)

// CommentMarker opens every markdown diff, so a CI job can find the comment
// it posted before and update it instead of adding another.
const CommentMarker = "<!-- tend diff -->"

// MaxComment is the longest comment GitHub takes (65,536 characters); a
// markdown diff stays within it.
const MaxComment = 65536

// maxActionLines bounds the plan lines shown for one device.
const maxActionLines = 200

// MarkdownOptions tune WriteMarkdown.
type MarkdownOptions struct {
	// Limit is the most bytes written; 0 means MaxComment. Devices that do
	// not fit are left out, and a note says how many.
	Limit int
}

// WriteMarkdown writes the diff as a pull-request comment: a summary,
// warnings, the changed profiles and rollouts, the rollouts that govern
// the changed devices (their waves, when each opens
// and how many of the devices fall in it), a table of the devices that
// change (add, change and delete as their plans count them, how many of
// the changes restart a service, and the download size when models were
// resolved) and a collapsible section per device with its
// plan. What does not fit in the limit is left out: table
// rows first keep their place, then the sections, and a note counts the
// devices left out.
func WriteMarkdown(w io.Writer, r *Result, opts MarkdownOptions) error {
	limit := opts.Limit
	if limit <= 0 {
		limit = MaxComment
	}
	t := r.Totals()
	var head strings.Builder
	head.WriteString(CommentMarker + "\n")
	head.WriteString("### tend diff\n\n")
	fmt.Fprintf(&head, "%s → %s: ", mdRevision(r.Base), mdRevision(r.Head))
	changing := t.Added + t.Removed + t.Changed
	if changing == 0 && t.Errors == 0 {
		fmt.Fprintf(&head, "**no device changes** (%s)", planner.Count(t.Devices, "device"))
		if t.Rollouts > 0 {
			fmt.Fprintf(&head, ", but **%s changed**", planner.Count(t.Rollouts, "rollout"))
		}
		head.WriteString(".\n")
		if more := mdWarnings(r) + mdProfiles(r.Profiles) + mdRolloutChanges(r.Rollouts); more != "" {
			head.WriteString("\n" + more)
		}
		_, err := io.WriteString(w, head.String())
		return err
	}
	fmt.Fprintf(&head, "**%d of %s change** (%d added, %d removed, %d changed)", changing, planner.Count(t.Devices, "device"), t.Added, t.Removed, t.Changed)
	if t.Errors > 0 {
		fmt.Fprintf(&head, ", **%d with errors**", t.Errors)
	}
	fmt.Fprintf(&head, ", %d unchanged.\n\nPlan: %d to add, %d to change, %d to delete.\n\n", t.Unchanged, t.Add, t.Change, t.Delete)
	head.WriteString(mdWarnings(r))
	head.WriteString(mdProfiles(r.Profiles))
	head.WriteString(mdRolloutChanges(r.Rollouts))
	head.WriteString(mdRollouts(r.Devices))
	head.WriteString("| device | status | add | change | delete | restarts |")
	if r.Resolved {
		head.WriteString(" download |")
	}
	head.WriteString("\n|:--|:--|--:|--:|--:|--:|")
	if r.Resolved {
		head.WriteString("--:|")
	}
	head.WriteString("\n")

	// The note is written last; keep room for the longest it can be.
	const noteRoom = 400
	budget := limit - head.Len() - noteRoom
	var rows, sections strings.Builder
	shown := 0
	for _, d := range r.Devices {
		row := mdRow(d, r.Resolved)
		if len(row) > budget {
			break
		}
		rows.WriteString(row)
		budget -= len(row)
		shown++
	}
	detailed := 0
	for _, d := range r.Devices[:shown] {
		s := mdSection(d)
		if len(s) > budget {
			s = mdSection(withoutDiffs(d))
		}
		if len(s) > budget {
			break
		}
		sections.WriteString(s)
		budget -= len(s)
		detailed++
	}

	var b strings.Builder
	b.WriteString(head.String())
	b.WriteString(rows.String())
	b.WriteString("\n")
	b.WriteString(sections.String())
	var left []string
	if n := len(r.Devices) - shown; n > 0 {
		left = append(left, fmt.Sprintf("%d of %d devices that change are left out of this comment", n, len(r.Devices)))
	}
	if n := shown - detailed; n > 0 {
		left = append(left, fmt.Sprintf("the plans of %d devices in the table are left out", n))
	}
	if len(left) > 0 {
		note := strings.Join(left, "; ")
		fmt.Fprintf(&b, "\n> [!NOTE]\n> %s%s (GitHub's comment size limit). Run `tend diff --format text` to see every plan.\n", strings.ToUpper(note[:1]), note[1:])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// maxProfileDevices bounds the devices named per changed profile in a
// comment; the text and JSON diffs name every one.
const maxProfileDevices = 20

// mdProfiles lists the changed profiles and the devices each reaches.
func mdProfiles(ps []ProfileChange) string {
	if len(ps) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Profiles changed:\n\n")
	for _, p := range ps {
		fmt.Fprintf(&b, "- %s\n", mdEscape(p.Summary(maxProfileDevices)))
	}
	b.WriteString("\n")
	return b.String()
}

// mdRolloutChanges lists the changed rollouts, what changed in each and
// the devices each governs.
func mdRolloutChanges(cs []RolloutChange) string {
	if len(cs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Rollouts changed:\n\n")
	for _, c := range cs {
		sep := " " // after "rollout/NAME:", its fields below
		switch {
		case c.Change != profileChanged:
			sep = ": "
		case len(c.Fields) == 1:
			sep = "; "
		}
		line := c.Summary() + sep + strings.Join(c.DeviceLines(maxProfileDevices), "; ")
		fmt.Fprintf(&b, "- %s\n", mdEscape(line))
		for _, f := range c.FieldLines() {
			fmt.Fprintf(&b, "  - %s\n", mdEscape(f))
		}
	}
	b.WriteString("\n")
	return b.String()
}

// mdWarnings is the diff's warnings as a GitHub alert.
func mdWarnings(r *Result) string {
	ws := r.Warnings()
	if len(ws) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("> [!WARNING]\n")
	for i, w := range ws {
		if i > 0 {
			b.WriteString(">\n")
		}
		fmt.Fprintf(&b, "> %s\n", mdEscape(w))
	}
	b.WriteString("\n")
	return b.String()
}

func mdRevision(r Revision) string {
	if r.Commit == "" {
		return "`" + r.Name + "`"
	}
	return fmt.Sprintf("`%s` (%s)", r.Name, short(r.Commit))
}

func mdRow(d Device, resolved bool) string {
	status := string(d.Status)
	if d.Status == Failed {
		status = "**error**"
	}
	if d.Plan == nil {
		cells := "| `" + d.Name + "` | " + status + " | | | | |"
		if resolved {
			cells += " |"
		}
		return cells + "\n"
	}
	s := d.Plan.Summary()
	// Change counts as the device's plan and the summary do, restarts
	// included; restarts says how many of those restart a service.
	row := fmt.Sprintf("| `%s` | %s | %d | %d | %d | %d |", d.Name, status, s.Add, s.Change, s.Delete, restarts(d.Plan))
	if resolved {
		size := ""
		if n, ok := download(d.Plan); ok {
			size = printable.HumanBytes(n)
		}
		row += " " + size + " |"
	}
	return row + "\n"
}

func mdSection(d Device) string {
	var b strings.Builder
	open := ""
	if d.Status == Failed {
		open = " open"
	}
	fmt.Fprintf(&b, "<details%s><summary><code>%s</code> %s", open, d.Name, d.Status)
	if d.Plan != nil {
		s := d.Plan.Summary()
		fmt.Fprintf(&b, ": %d to add, %d to change, %d to delete", s.Add, s.Change, s.Delete)
	}
	b.WriteString("</summary>\n\n")
	if d.Note != "" {
		fmt.Fprintf(&b, "Note: %s\n\n", mdEscape(d.Note))
	}
	var body string
	if d.Err != nil {
		body = d.Err.Error()
	} else {
		body = actionLines(shownPlan(d), maxActionLines)
	}
	fence := codeFence(body)
	fmt.Fprintf(&b, "%stext\n%s\n%s\n\n", fence, strings.TrimRight(body, "\n"), fence)
	if d.Err == nil {
		b.WriteString(mdDiffs(d.Plan))
	}
	b.WriteString("</details>\n\n")
	return b.String()
}

// actionLines is the plan's action lines as the text plan prints them, at
// most limit of them.
func actionLines(cs *planner.Changeset, limit int) string {
	if cs.Empty() {
		return "No changes."
	}
	width := 0
	for _, a := range cs.Actions {
		width = min(max(width, len(a.Resource)), 48)
	}
	var b strings.Builder
	for i, a := range cs.Actions {
		if i == limit {
			fmt.Fprintf(&b, "… and %s more\n", planner.Count(len(cs.Actions)-limit, "action"))
			break
		}
		fmt.Fprintf(&b, "%s %-*s  %s%s\n", a.Type.Symbol(), width, a.Resource, a.Reason, planner.OriginSuffix(a))
	}
	return b.String()
}

// codeFence returns a fence longer than any run of backticks in s.
func codeFence(s string) string {
	longest, run := 0, 0
	for _, c := range s {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// mdEscape keeps text from being read as markup.
func mdEscape(s string) string {
	r := strings.NewReplacer("<", "&lt;", ">", "&gt;", "`", "\\`", "*", "\\*", "_", "\\_", "|", "\\|")
	return r.Replace(s)
}
