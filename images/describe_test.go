package images_test

import (
	"fmt"
	"testing"

	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/internal/testkit"
)

// Issue 22: the size an attached image was given at and the size it is sent at, each once.
func TestDescribeNamesGivenAndSentSizes(t *testing.T) {
	shot := testkit.SeededPNG(t, 640, 360, 3)
	half := func(w, h int) (int, int) { return w / 2, h / 2 }
	im, err := images.Limits{Fit: half}.Check(shot)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("shot.png 640×360 %s → 320×180 %s", images.Size(len(shot)), images.Size(len(im.Data)))
	if got := images.Describe("shot.png", shot, im.Data); got != want {
		t.Errorf("resized: %q, want %q", got, want)
	}
	if images.Size(len(shot)) == images.Size(len(im.Data)) {
		t.Fatalf("the test image's two sizes read the same (%s): it cannot tell them apart", images.Size(len(shot)))
	}
	small := testkit.PNG(t, 16, 16)
	if got, want := images.Describe("icon.png", small, small), "icon.png 16×16 "+images.Size(len(small)); got != want {
		t.Errorf("kept as given: %q, want %q", got, want)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int]string{0: "0 bytes", 999: "999 bytes", 1000: "1.0 KB", 3461: "3.5 KB",
		412_000: "412 KB", 999_499: "999 KB", 999_500: "1.0 MB", 21 << 20: "22 MB", 3_000_000_000: "3.0 GB"} {
		if got := images.Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
