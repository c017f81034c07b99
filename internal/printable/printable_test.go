package printable

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCut(t *testing.T) {
	long := strings.Repeat("v", 300)
	for _, tc := range []struct {
		name, in string
		max      int
		want     string
	}{
		{"printable text as it is", `1.0.0 "stable" é`, 100, `1.0.0 "stable" é`},
		{"a newline, a terminal escape, a C1 control, a format character", "a\nb\x1b[2Jc\u009b2Jd\u202e", 100, `a\nb\x1b[2Jc\u009b2Jd\u202e`},
		{"a byte that is not UTF-8", "4\xff", 100, `4\xff`},
		{"long text cut, saying its length", long, 200, long[:200] + "… (300 bytes)"},
		{"exactly max is not cut", long[:200], 200, long[:200]},
		{"never within a character", "aé", 2, "a… (3 bytes)"},
		{"never within an escape", "ab\n", 3, "ab… (3 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Cut(tc.in, tc.max))
		})
	}
}

func TestOneLine(t *testing.T) {
	require.Equal(t, "rolled back: service/web a b c d é", OneLine("rolled back:\nservice/web a\tb\x7fc\rd é"))
}
