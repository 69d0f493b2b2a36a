// Package textcut shortens text for one line of a display or a stored label (a session title, a tool result in
// a progress line, a status line). It is the one place visor cuts such text, so every front end and the store
// cut the same way: never inside a character a person sees as one (a rune, an emoji with its modifiers, a
// letter with its combining marks), and always to valid UTF-8, whatever came in.
package textcut

import (
	"strings"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// Ellipsis marks text that was cut.
const Ellipsis = "…"

// Line folds every run of white space (newlines included) in s to one space, trims the ends, and cuts the
// result to at most n user-perceived characters (grapheme clusters), the last of them Ellipsis when it was cut.
// Bytes that are not UTF-8 become U+FFFD first, so the result is always valid UTF-8. n < 1 gives "".
func Line(s string, n int) string {
	if n < 1 {
		return ""
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s // at least one byte a character: it fits
	}
	// Keep n-1 characters and the ellipsis, unless the whole of s is n characters or fewer.
	rest, state, kept, cut := s, -1, 0, -1
	for rest != "" {
		if kept == n-1 {
			cut = len(s) - len(rest)
		}
		if kept == n {
			return s[:cut] + Ellipsis
		}
		_, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		kept++
	}
	return s
}
