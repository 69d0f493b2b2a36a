package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

func TestLine(t *testing.T) {
	family := "👨‍👩‍👧"   // one character of five runes
	flag := "🇩🇪"        // one character of two runes
	accent := "e\u0301" // é as e and a combining accent
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 10, ""},
		{"short", 10, "short"},
		{"  two\n\tlines  here ", 20, "two lines here"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven char", 10, "eleven ch…"},
		{"abc", 1, "…"},
		{"abc", 0, ""},
		{"a", 1, "a"},
		{"héllo wörld", 6, "héllo…"},
		{strings.Repeat(family, 4), 3, family + family + "…"},
		{strings.Repeat(family, 3), 3, strings.Repeat(family, 3)},
		{flag + flag + flag, 2, flag + "…"},
		{"caf" + accent + accent + "x", 4, "caf…"},
		{"caf" + accent + "s", 5, "caf" + accent + "s"},
		{"日本語のテキスト", 4, "日本語…"},
		{"bad \xff\xfe bytes", 20, "bad \uFFFD bytes"}, // one replacement a run of bad bytes
		{"\xe6\x97", 5, "\uFFFD"},
	} {
		got := Line(c.in, c.n)
		if got != c.want {
			t.Errorf("Line(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Line(%q, %d) = %q: not valid UTF-8", c.in, c.n, got)
		}
	}
}

// FuzzLine: whatever comes in, the result is valid UTF-8 of at most n characters, has no run of white space,
// and is a prefix of the folded input (plus the ellipsis) cut at a character boundary.
func FuzzLine(f *testing.F) {
	for _, s := range []string{"", "hello world", "👨‍👩‍👧👨‍👩‍👧", "e\u0301e\u0301", "\xff\xfe", "a\n\n b", "🇩🇪🇩🇪🇩🇪"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n%64 + 1
		if n < 1 {
			n += 64
		}
		got := Line(s, n)
		if !utf8.ValidString(got) {
			t.Fatalf("Line(%q, %d) = %q: invalid UTF-8", s, n, got)
		}
		if c := uniseg.GraphemeClusterCount(got); c > n {
			t.Fatalf("Line(%q, %d) = %q: %d characters", s, n, got, c)
		}
		folded := strings.Join(strings.Fields(strings.ToValidUTF8(s, "\uFFFD")), " ")
		body, cut := strings.CutSuffix(got, Ellipsis)
		if !cut || got == folded {
			if got != folded {
				t.Fatalf("Line(%q, %d) = %q, want the whole %q", s, n, got, folded)
			}
			return
		}
		if !strings.HasPrefix(folded, body) {
			t.Fatalf("Line(%q, %d) = %q: not a prefix of %q", s, n, got, folded)
		}
		// The cut falls between characters: the characters of body are the first ones of folded.
		if uniseg.GraphemeClusterCount(body)+uniseg.GraphemeClusterCount(folded[len(body):]) != uniseg.GraphemeClusterCount(folded) {
			t.Fatalf("Line(%q, %d) = %q: cut inside a character", s, n, got)
		}
	})
}
