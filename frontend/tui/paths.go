package tui

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/visorhq/visor/internal/userpath"
)

// imageExts are the file name endings a dropped path must have to be attached rather than typed.
var imageExts = map[string]bool{".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".webp": true, ".bmp": true}

// droppedImages reads a paste as the paths of image files dropped onto the terminal: terminals paste them
// quoted ('…' or "…"), with spaces escaped (\ ), or as file:// URLs, several separated by spaces or newlines.
// It returns nil unless every part is an existing image file, so a pasted sentence stays text.
func droppedImages(paste string) []string {
	var out []string
	for _, p := range splitShellWords(strings.TrimSpace(paste)) {
		p = strings.TrimPrefix(p, "file://")
		p = userpath.Expand(p)
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() || !imageExts[strings.ToLower(filepath.Ext(p))] {
			return nil
		}
		out = append(out, p)
	}
	return out
}

// splitShellWords splits s at unquoted, unescaped whitespace, removing the quotes and escapes.
func splitShellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	esc := false
	for _, r := range s {
		switch {
		case esc:
			cur.WriteRune(r)
			esc = false
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\\':
			esc, inWord = true, true
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// completePath completes the path prefix typed so far: the longest common extension of the entries that
// match (a folder gets its /), and the matches themselves when there are several. ~ is kept as typed.
func completePath(prefix string) (completed string, matches []string) {
	if prefix == "~" {
		prefix = "~/"
	}
	i := strings.LastIndex(prefix, "/")
	typedDir, base := prefix[:i+1], prefix[i+1:]
	readDir := "."
	if typedDir != "" {
		readDir = userpath.Expand(typedDir)
	}
	ents, err := os.ReadDir(readDir)
	if err != nil {
		return prefix, nil
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, base) || (strings.HasPrefix(name, ".") && !strings.HasPrefix(base, ".")) {
			continue
		}
		isDir := e.IsDir()
		if e.Type()&os.ModeSymlink != 0 {
			if st, err := os.Stat(filepath.Join(readDir, name)); err == nil && st.IsDir() {
				isDir = true
			}
		}
		if isDir {
			name += "/"
		} else if !imageExts[strings.ToLower(filepath.Ext(name))] {
			continue // only folders and images: this completes /image paths
		}
		matches = append(matches, name)
	}
	sort.Strings(matches)
	if len(matches) == 0 {
		return prefix, nil
	}
	common := matches[0]
	for _, m := range matches[1:] {
		for !strings.HasPrefix(m, common) {
			common = common[:len(common)-1]
		}
	}
	// What the user typed before the last element (~, a relative folder) stays as typed.
	return typedDir + common, matches
}
