package images_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/image/bmp"

	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/internal/testimage"
	"github.com/visorhq/visor/internal/testkit"
)

func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range m.Pix {
		m.Pix[i] = byte(i * 7)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestCheck(t *testing.T) {
	good := pngOf(t, 32, 24)
	var bm bytes.Buffer
	if err := bmp.Encode(&bm, image.NewGray(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	webp := append([]byte("RIFF\x10\x00\x00\x00WEBPVP8 "), make([]byte, 16)...)
	cases := []struct {
		name string
		data []byte
		lim  images.Limits
		want error
	}{
		{"png", good, images.Limits{}, nil},
		{"bmp", bm.Bytes(), images.Limits{}, nil},
		{"empty", nil, images.Limits{}, images.ErrEmpty},
		{"text", []byte("hello, this is not an image"), images.Limits{}, images.ErrNotImage},
		{"webp", webp, images.Limits{}, images.ErrNotImage},
		{"truncated", good[:len(good)/2], images.Limits{}, images.ErrCorrupt},
		{"corrupt", append(append([]byte(nil), good[:40]...), bytes.Repeat([]byte{0xff}, 200)...), images.Limits{}, images.ErrCorrupt},
		{"oversized", good, images.Limits{MaxBytes: 100}, images.ErrTooLarge},
		{"bomb", testimage.BombPNG(100000, 100000), images.Limits{}, images.ErrTooBig},
		{"too many pixels", good, images.Limits{MaxPixels: 100}, images.ErrTooBig},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			im, err := c.lim.Check(c.data)
			if c.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !bytes.Equal(im.Data, c.data) || im.Width == 0 {
					t.Fatalf("accepted image changed: %+v", im)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestCheckNeverPanics(t *testing.T) {
	good := pngOf(t, 16, 16)
	for i := 0; i < len(good); i++ {
		_, _ = images.Limits{}.Check(good[:i])
		c := append([]byte(nil), good...)
		c[i] ^= 0xa5
		_, _ = images.Limits{}.Check(c)
	}
	_ = color.Black
}

func TestReadFileRefusesFIFOWithoutBlocking(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo.png")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	_, err := images.Limits{}.ReadFile(p)
	if !errors.Is(err, images.ErrUnreadable) {
		t.Fatalf("err = %v, want a refusal of the FIFO", err)
	}
	if _, err := (images.Limits{}).ReadFile("/dev/zero"); err == nil {
		t.Fatal("/dev/zero accepted")
	}
	big := filepath.Join(t.TempDir(), "big.png")
	if err := os.WriteFile(big, make([]byte, 2000), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (images.Limits{MaxBytes: 1000}).ReadFile(big); !errors.Is(err, images.ErrTooLarge) {
		t.Fatalf("err = %v, want too large", err)
	}
}

func FuzzCheck(f *testing.F) {
	var b bytes.Buffer
	_ = png.Encode(&b, image.NewGray(image.Rect(0, 0, 4, 4)))
	f.Add(b.Bytes())
	f.Add(testimage.BombPNG(1<<20, 1<<20))
	f.Fuzz(func(t *testing.T, data []byte) {
		im, err := images.Limits{MaxPixels: 1 << 20}.Check(data)
		if err == nil && (im.Width*im.Height > 1<<20 || !bytes.Equal(im.Data, data)) {
			t.Fatalf("accepted %dx%d", im.Width, im.Height)
		}
	})
}

// TestFitResizesOnceAtIntake: an image larger than Fit's size is resized to it and re-encoded as PNG, keeping
// its content (a left half dark, a right half light stays so); one within it keeps its exact bytes.
func TestFitResizesOnceAtIntake(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 1600, 900))
	for y := range 900 {
		for x := range 1600 {
			v := uint8(20)
			if x >= 800 {
				v = 230
			}
			src.SetRGBA(x, y, color.RGBA{v, v, v, 255})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, src, nil); err != nil {
		t.Fatal(err)
	}
	half := func(w, h int) (int, int) { return w / 2, h / 2 }
	im, err := images.Limits{Fit: half}.Check(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !im.Resized() || im.Width != 800 || im.Height != 450 || im.OrigWidth != 1600 || im.MIME != "image/png" {
		t.Fatalf("got %s %d×%d (from %d×%d)", im.MIME, im.Width, im.Height, im.OrigWidth, im.OrigHeight)
	}
	got, err := png.Decode(bytes.NewReader(im.Data))
	if err != nil {
		t.Fatal(err)
	}
	if got.Bounds().Dx() != 800 || got.Bounds().Dy() != 450 {
		t.Fatalf("encoded %v", got.Bounds())
	}
	if l, r := gray(got.At(100, 200)), gray(got.At(700, 200)); l > 60 || r < 190 {
		t.Errorf("content lost in the resize: left %d, right %d", l, r)
	}
	// Within the size (or a Fit that would enlarge): the exact bytes stay.
	for _, fit := range []func(w, h int) (int, int){func(w, h int) (int, int) { return w, h },
		func(w, h int) (int, int) { return 2 * w, 2 * h }} {
		im, err := images.Limits{Fit: fit}.Check(b.Bytes())
		if err != nil || im.Resized() || !bytes.Equal(im.Data, b.Bytes()) || im.MIME != "image/jpeg" {
			t.Errorf("kept image changed: resized %v, %s, err %v", im.Resized(), im.MIME, err)
		}
	}
}

func gray(c color.Color) int {
	r, _, _, _ := c.RGBA()
	return int(r >> 8)
}

// BenchmarkCheckScreenshot is what one intake check of a 1440p screenshot costs (decode and policy, no resize):
// the price of checking an image twice on a turn's critical path.
func BenchmarkCheckScreenshot(b *testing.B) {
	data := testkit.SeededPNG(b, 2560, 1440, 1)
	var l images.Limits
	for b.Loop() {
		if _, err := l.Check(data); err != nil {
			b.Fatal(err)
		}
	}
}

func riff(fourcc string, payload []byte) []byte {
	var b []byte
	b = append(b, "RIFF"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(12+len(payload)))
	b = append(b, "WEBP"...)
	b = append(b, fourcc...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// webpLossless is a VP8L header for a w×h image followed by filler: enough for the size to be read.
func webpLossless(w, h int) []byte {
	bits := uint32(w-1) | uint32(h-1)<<14
	p := []byte{0x2f}
	p = binary.LittleEndian.AppendUint32(p, bits)
	return riff("VP8L", append(p, make([]byte, 16)...))
}

// TestReadHeader reads every accepted format and the three WebP headers without decoding pixels; a WebP is
// named even when its size cannot be read, and Check refuses every WebP by name.
func TestReadHeader(t *testing.T) {
	lossy := []byte{0x50, 0x01, 0x00, 0x9d, 0x01, 0x2a}
	lossy = binary.LittleEndian.AppendUint16(lossy, 1920)
	lossy = binary.LittleEndian.AppendUint16(lossy, 1080|0xc000) // top bits are the scale, not size
	lossy = append(lossy, 0, 0)
	ext := []byte{0x10, 0, 0, 0, 0xff, 0x0f, 0x00, 0x3f, 0x02, 0x00} // canvas 4096 x 576
	var bm, jb bytes.Buffer
	if err := bmp.Encode(&bm, image.NewGray(image.Rect(0, 0, 8, 6))); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&jb, image.NewGray(image.Rect(0, 0, 10, 4)), nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		data   []byte
		format string
		w, h   int
		err    error
	}{
		{"png", pngOf(t, 32, 24), "png", 32, 24, nil},
		{"jpeg", jb.Bytes(), "jpeg", 10, 4, nil},
		{"bmp", bm.Bytes(), "bmp", 8, 6, nil},
		{"bomb", testimage.BombPNG(20000, 20000), "png", 20000, 20000, nil},
		{"webp lossy", riff("VP8 ", lossy), "webp", 1920, 1080, nil},
		{"webp lossless", webpLossless(300, 17), "webp", 300, 17, nil},
		{"webp extended", riff("VP8X", append(ext, make([]byte, 8)...)), "webp", 4096, 576, nil},
		{"webp bad start code", riff("VP8 ", append([]byte{0, 0, 0, 1, 2, 3}, make([]byte, 8)...)), "webp", 0, 0, nil},
		{"webp truncated", riff("VP8L", []byte{0x2f}), "webp", 0, 0, nil},
		{"not riff", []byte("RIFX0000WEBPVP8L00000000000000000000"), "", 0, 0, images.ErrNotImage},
		{"text", []byte("hello"), "", 0, 0, images.ErrNotImage},
		{"empty", nil, "", 0, 0, images.ErrNotImage},
		{"cut png", pngOf(t, 4, 4)[:20], "", 0, 0, images.ErrCorrupt},
	}
	for _, c := range cases {
		h, err := images.ReadHeader(c.data)
		if h.Format != c.format || h.Width != c.w || h.Height != c.h || !errors.Is(err, c.err) {
			t.Errorf("%s: %+v %v, want %s %d×%d %v", c.name, h, err, c.format, c.w, c.h, c.err)
		}
		if c.format == "webp" {
			if h.MIME != "image/webp" || h.Accepted() {
				t.Errorf("%s: %+v: a WebP is named and not accepted", c.name, h)
			}
			if _, err := (images.Limits{}).Check(c.data); !errors.Is(err, images.ErrNotImage) ||
				!strings.Contains(err.Error(), "WebP, which llama-server cannot decode") {
				t.Errorf("%s: Check: %v, want a refusal naming WebP", c.name, err)
			}
		}
	}
}

func TestReadHeaderNeverPanics(t *testing.T) {
	for _, b := range [][]byte{webpLossless(5, 5), riff("VP8X", make([]byte, 10)), pngOf(t, 3, 3)} {
		for i := range b {
			_, _ = images.ReadHeader(b[:i])
		}
	}
}

// TestReadFileSaysWhatToDo: a missing file and a URL (a screenshot's link pasted as --image, or handed to
// view_image) are told what to do, not only what stat said.
func TestReadFileSaysWhatToDo(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{filepath.Join(t.TempDir(), "shot.png"), "image file cannot be read: no such file: check the path"},
		{"https://example.com/shot.png", "it is a URL, and visor reads image files: download it first (curl -o shot.png URL)"},
		{"HTTP://example.com/a.png", "it is a URL"},
	} {
		_, err := images.Limits{}.ReadFile(c.path)
		if !errors.Is(err, images.ErrUnreadable) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadFile(%s) = %v, want %q", c.path, err, c.want)
		}
		if strings.Contains(fmt.Sprint(err), "stat ") {
			t.Errorf("ReadFile(%s) = %v: stat's words, not the user's", c.path, err)
		}
	}
}
