package tui

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestCompletePath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, p := range []string{"shots/a-screen.png", "shots/a-scroll.jpg", "shots/notes.txt", "shots/sub/x.png", ".hidden.png"} {
		full := filepath.Join(home, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		in, want string
		matches  []string
	}{
		{"~", "~/shots/", []string{"shots/"}},
		{"~/", "~/shots/", []string{"shots/"}},
		{"~/sh", "~/shots/", []string{"shots/"}},
		{"~/shots/a", "~/shots/a-scr", []string{"a-screen.png", "a-scroll.jpg"}},
		{"~/shots/a-scre", "~/shots/a-screen.png", []string{"a-screen.png"}},
		{"~/shots/n", "~/shots/n", nil}, // notes.txt is not an image
		{home + "/shots/s", home + "/shots/sub/", []string{"sub/"}},
		{"~/nowhere/x", "~/nowhere/x", nil},
	}
	for _, tc := range cases {
		got, matches := completePath(tc.in)
		if got != tc.want || !reflect.DeepEqual(matches, tc.matches) {
			t.Errorf("completePath(%q) = %q %q, want %q %q", tc.in, got, matches, tc.want, tc.matches)
		}
	}
}

func TestDroppedImages(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "my shot.png"), filepath.Join(dir, "b.jpg")
	for _, p := range []string{a, b, filepath.Join(dir, "c.txt")} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string][]string{
		"'" + a + "'":                      {a},
		dir + "/my\\ shot.png " + b + "\n": {a, b},
		"file://" + b:                      {b},
		"\"" + a + "\" " + dir + "/c.txt":  nil, // not every part is an image: it stays text
		"look at this":                     nil,
		dir + "/missing.png":               nil,
	}
	for in, want := range cases {
		if got := droppedImages(in); !reflect.DeepEqual(got, want) {
			t.Errorf("droppedImages(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStatusLine(t *testing.T) {
	got := StatusLine(Status{Model: "qwen", ContextUsed: 1024, ContextSize: 4096, TokensPerSecond: 51.25, DraftAccepted: 3,
		Drafted: 4, Resident: []string{"projector", "MTP"}, Ahead: "encoding 1 image ahead", Session: "0123456789abcdef"})
	want := "qwen · ctx 1024/4096 (25%) · 51.2 tok/s · draft 75% of 4 · resident: projector+MTP · encoding 1 image ahead · session 0123456789ab"
	if got != want {
		t.Errorf("StatusLine:\n got %s\nwant %s", got, want)
	}
}
