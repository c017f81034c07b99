package printable

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Cut is s as tend prints text it did not write: every character a
// terminal acts on or a reader is misled by (control characters such as
// ESC and newline, format characters such as U+202E, bytes that are not
// UTF-8) escaped as Go escapes it (\x1b, \n, \u202e), and cut to max
// bytes, never within a character or an escape, saying how long s was:
// "… (N bytes)".
func Cut(s string, max int) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		var e string
		switch {
		case r == utf8.RuneError && n == 1:
			e = fmt.Sprintf(`\x%02x`, s[i])
		case strconv.IsPrint(r):
			e = s[i : i+n]
		default:
			q := strconv.QuoteRune(r)
			e = q[1 : len(q)-1]
		}
		if b.Len()+len(e) > max {
			fmt.Fprintf(&b, "… (%d bytes)", len(s))
			break
		}
		b.WriteString(e)
		i += n
	}
	return b.String()
}

// OneLine is s on one line, as a table cell or a stored detail keeps a
// value a device sent: every ASCII control character (newline and tab
// included) and DEL a space.
func OneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// ListedItemBytes is the most of one item of a list ShortList prints.
const ListedItemBytes = 100

// ShortList joins at most n items, each cut to ListedItemBytes, saying how
// many more there are: a list a registry or an artifact sends (tags, media
// types, platforms) is quoted in errors, logs and status, never whole.
// An item with a character that is not printable (a newline, a terminal
// escape) or a byte that is not UTF-8 is shown escaped (see Cut).
func ShortList(items []string, n int) string {
	shown := make([]string, 0, min(n, len(items)))
	for _, it := range items[:min(n, len(items))] {
		shown = append(shown, Cut(it, ListedItemBytes))
	}
	out := strings.Join(shown, ", ")
	if len(items) > n {
		out += fmt.Sprintf(" … and %d more", len(items)-n)
	}
	return out
}

// HumanBytes prints a size as people read disk sizes: 4.1 GB, 512.0 MB.
func HumanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
