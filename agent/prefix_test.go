package agent

import "testing"

func TestSharedImagePrefix(t *testing.T) {
	const m = "<__media_X__>"
	for _, c := range []struct {
		name, x, y, want string
		images           int
	}{
		{"cut at the newline after the image", "<s>u\n" + m + "\nA<e>", "<s>u\n" + m + "\nB<e>", "<s>u\n" + m + "\n", 1},
		{"back to the last newline after the last image", "a\n" + m + m + "\nx\n<s>asst", "a\n" + m + m + "\nx\n<s>user", "a\n" + m + m + "\nx\n", 2},
		// A prompt must not end with an image (llama-server aborts), and text right after it may still change.
		{"no text after the image", "a\n" + m + "A", "a\n" + m + "B", "", 0},
		{"no image", "hello\nA", "hello\nB", "", 0},
		{"image only in one", "a\n" + m + "\nA", "a\nB", "", 0},
		{"identical", "a\n" + m + "\nx", "a\n" + m + "\nx", "a\n" + m + "\n", 1},
	} {
		got, n := SharedImagePrefix(c.x, c.y, m)
		if got != c.want || n != c.images {
			t.Errorf("%s: got %q, %d images; want %q, %d", c.name, got, n, c.want, c.images)
		}
	}
	if got, n := SharedImagePrefix("a\n\n", "a\n\n", ""); got != "" || n != 0 {
		t.Errorf("empty marker: %q %d", got, n)
	}
}
