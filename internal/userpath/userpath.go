// Package userpath reads paths as a person types them: a leading ~ is their home folder, and a relative path in
// a file (a config, an agent file) is relative to that file's folder.
package userpath

import (
	"os"
	"path/filepath"
	"strings"
)

// Expand turns a leading ~ or ~/ into the home folder, as a shell would; without a home folder p is kept.
func Expand(p string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	return filepath.Join(home, strings.TrimPrefix(p, "~"))
}

// Resolve makes p absolute against dir after expanding ~; an empty p stays empty (the setting is unset).
func Resolve(dir, p string) string {
	if p == "" {
		return ""
	}
	p = Expand(p)
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return filepath.Clean(p)
}
