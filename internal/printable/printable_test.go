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

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{999: "999 B", 4_100_000_000: "4.1 GB", 2_300_000_000: "2.3 GB", 512_000_000: "512.0 MB"} {
		require.Equal(t, want, HumanBytes(n))
	}
}

// A list a registry sends is quoted in errors, never whole: each item is
// cut, and a long list says how many more it has.
func TestShortList(t *testing.T) {
	long := strings.Repeat("v", 1<<20)
	got := ShortList([]string{"a", long, "c", "d"}, 3)
	require.Equal(t, "a, "+strings.Repeat("v", ListedItemBytes)+"… (1048576 bytes), c … and 1 more", got)
	require.Equal(t, `1.0\nPlan: 0 to add, 2\x1b[2J, 3\u009b2J, 4\xff`, ShortList([]string{"1.0\nPlan: 0 to add", "2\x1b[2J", "3\u009b2J", "4\xff"}, 4),
		"a newline, a terminal escape, a C1 control or a byte that is not UTF-8 is escaped")
}
