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
