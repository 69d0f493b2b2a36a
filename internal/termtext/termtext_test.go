package termtext

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain text, newlines and tabs stay", "a\tb\nc ü 日本 🙂\n", "a\tb\nc ü 日本 🙂\n"},
		{"OSC 52 clipboard write", "x\x1b]52;c;cm0gLXJmIH4=\x07y", "x^[]52;c;cm0gLXJmIH4=^Gy"},
		{"OSC 0 title with ST", "\x1b]0;pwned\x1b\\ok", "^[]0;pwned^[\\ok"},
		{"CSI clear screen and cursor up", "\x1b[2J\x1b[1A", "^[[2J^[[1A"},
		{"8-bit CSI as a rune", "a\u009b2Jb", "a<U+009B>2Jb"},
		{"8-bit CSI as a raw byte", "a\x9b2Jb", `a\x9b2Jb`},
		{"bidi override", "file\u202egnp.exe", "file<U+202E>gnp.exe"},
		{"every bidi control", "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069",
			"<U+061C><U+200E><U+200F><U+202A><U+202B><U+202C><U+202D><U+2066><U+2067><U+2068><U+2069>"},
		{"carriage return hides nothing", "rm -rf ~ is safe\rSAFE:", `rm -rf ~ is safe\rSAFE:`},
		{"CR LF is a newline", "line one\r\nline two\r\n", "line one\nline two\n"},
		{"backspace and DEL", "ab\bc\x7f\x00", "ab^Hc^?^@"},
		{"OSC 8 link shows its target", "see \x1b]8;;https://evil.example/x\x1b\\the docs\x1b]8;;\x1b\\ now",
			"see the docs <https://evil.example/x> now"},
		{"OSC 8 with parameters and BEL", "\x1b]8;id=1;http://a.example\x07A\x1b]8;;\x07", "A <http://a.example>"},
		{"OSC 8 never closed", "\x1b]8;;http://a.example\x07text", "text <http://a.example>"},
		{"OSC 8 reopened", "\x1b]8;;http://a\x07one\x1b]8;;http://b\x07two\x1b]8;;\x07", "one <http://a>two <http://b>"},
		{"OSC 8 target with controls", "\x1b]8;;http://a\u202eb\x07t\x1b]8;;\x07", "t <http://a<U+202E>b>"},
		{"OSC 8 cut by another escape", "\x1b]8;;http://a\x1b[2J", "^[]8;;http://a^[[2J"},
		{"OSC 8 without a terminator", "\x1b]8;;http://a", "^[]8;;http://a"},
		{"OSC 8 without parameters' semicolon", "\x1b]8;http://a\x07", "^[]8;http://a^G"},
		{"lone ESC at the end", "abc\x1b", "abc^["},
		{"cut UTF-8 at the end", "ab\xe2\x80", `ab\xe2\x80`},
	} {
		if got := Clean(c.in); got != c.want {
			t.Errorf("%s: Clean(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

// A sequence or character split across writes comes out as if written whole.
func TestWriterHoldsSplitSequences(t *testing.T) {
	for _, in := range []string{
		"a\x1b]52;c;Zm9v\x07b",
		"see \x1b]8;;https://evil.example/x\x1b\\the docs\x1b]8;;\x1b\\ now",
		"x\u009by\u202ez\r\nw\rv",
		"日本語 🙂 ü",
		"\x1b]8;;http://a.example\x07never closed",
	} {
		want := Clean(in)
		for cut := 0; cut <= len(in); cut++ {
			for cut2 := cut; cut2 <= len(in); cut2++ {
				var out bytes.Buffer
				w := NewWriter(&out)
				for _, part := range []string{in[:cut], in[cut:cut2], in[cut2:]} {
					if n, err := w.WriteString(part); err != nil || n != len(part) {
						t.Fatalf("Write(%q) = %d, %v", part, n, err)
					}
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				if out.String() != want {
					t.Fatalf("%q cut at %d and %d: %q, want %q", in, cut, cut2, out.String(), want)
				}
			}
		}
	}
}

// A link opener that never ends is held only up to its bound, then shown as text, so a stream cannot make the
// Writer hold everything after it.
func TestWriterBoundsAHeldLink(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	w.WriteString("\x1b]8;;http://a.example/")
	for range maxLinkOpener / 100 {
		w.WriteString(strings.Repeat("a", 100))
	}
	if out.Len() != 0 {
		t.Fatalf("wrote %d bytes of an opener under the bound", out.Len())
	}
	w.WriteString(strings.Repeat("a", 200))
	if !strings.HasPrefix(out.String(), "^[]8;;http://a.example/aaa") {
		t.Fatalf("an opener past the bound was not shown: %.60q", out.String())
	}
}

// unsafeAt reports the first byte a terminal would act on in s, or -1.
func unsafeAt(s string) int {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return i
			}
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f, hidden(r):
			return i
		}
	}
	return -1
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"\x1b]8;;http://a\x07t\x1b]8;;\x07", "a\r\nb\rc", "\xc2\x9b", "\u202e", "\x1b]52;c;x\x07"} {
		f.Add(s, uint16(3))
	}
	f.Fuzz(func(t *testing.T, in string, cut uint16) {
		got := Clean(in)
		if i := unsafeAt(got); i >= 0 {
			t.Fatalf("Clean(%q) = %q: byte %d is acted on by a terminal", in, got, i)
		}
		c := int(cut) % (len(in) + 1)
		var out bytes.Buffer
		w := NewWriter(&out)
		w.WriteString(in[:c])
		w.WriteString(in[c:])
		w.Flush()
		if out.String() != got {
			t.Fatalf("%q written in two at %d: %q, Clean: %q", in, c, out.String(), got)
		}
	})
}
