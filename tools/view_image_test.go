package tools

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

func testImage(w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, x%h, color.RGBA{R: 200, A: 255})
	}
	return img
}

func pngBytes(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	must(t, png.Encode(&b, testImage(w, h)))
	return b.Bytes()
}

// A 1x1 lossless WebP (the one browser feature tests use); the standard library cannot encode WebP.
const webp1x1 = "UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA=="

func TestViewImage(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var jb, gb bytes.Buffer
	must(t, jpeg.Encode(&jb, testImage(32, 16), nil))
	must(t, gif.Encode(&gb, testImage(8, 8), nil))
	webp, err := base64.StdEncoding.DecodeString(webp1x1)
	must(t, err)
	pngData := pngBytes(t, 64, 48)
	files := map[string][]byte{
		"shot.png": pngData, "photo.jpg": jb.Bytes(), "anim.gif": gb.Bytes(), "tiny.webp": webp,
		"misnamed.jpg": pngData, "notes.png": []byte("just text"), "broken.png": pngData[:20],
	}
	for n, b := range files {
		must(t, os.WriteFile(filepath.Join(root, n), b, 0o644))
	}
	r := builtinRegistry(t, BuiltinConfig{Root: root})

	cases := []struct{ path, mime, text string }{
		{"shot.png", "image/png", "shot.png: image/png, 64x48 px"},
		{"photo.jpg", "image/jpeg", "photo.jpg: image/jpeg, 32x16 px"},
		{"anim.gif", "image/gif", "anim.gif: image/gif, 8x8 px"},
		{"tiny.webp", "image/webp", "tiny.webp: image/webp, 1x1 px"},
		{"misnamed.jpg", "image/png", "misnamed.jpg: image/png, 64x48 px"},
	}
	for _, c := range cases {
		res := mustOK(t, call(t, r, ViewImageName, map[string]any{"path": c.path}))
		if len(res.Images) != 1 || res.Images[0].MIME != c.mime || !bytes.Equal(res.Images[0].Data, files[c.path]) {
			t.Errorf("%s: images = %d", c.path, len(res.Images))
			continue
		}
		if !contains(res.Text, c.text) {
			t.Errorf("%s: text %q lacks %q", c.path, res.Text, c.text)
		}
	}
	mustFail(t, call(t, r, ViewImageName, map[string]any{"path": "notes.png"}), "text/plain", "not a PNG")
	mustFail(t, call(t, r, ViewImageName, map[string]any{"path": "broken.png"}), "corrupt")
}

func TestWebPSizeVariants(t *testing.T) {
	t.Parallel()
	riff := func(chunk string, payload []byte) []byte {
		b := append([]byte("RIFF\x00\x00\x00\x00WEBP"+chunk+"\x00\x00\x00\x00"), payload...)
		return append(b, make([]byte, 16)...)
	}
	// Lossy: frame tag (3 bytes), start code, then 14-bit width and height.
	vp8 := riff("VP8 ", []byte{0, 0, 0, 0x9d, 0x01, 0x2a, 0x40, 0x01, 0xf0, 0x00})
	// Extended: flags (4 bytes), then 24-bit width-1 and height-1.
	vp8x := riff("VP8X", []byte{0, 0, 0, 0, 0x3f, 0x01, 0, 0xef, 0, 0})
	for _, c := range []struct {
		data []byte
		w, h int
	}{{vp8, 320, 240}, {vp8x, 320, 240}} {
		w, h, err := webpSize(c.data)
		if err != nil || w != c.w || h != c.h {
			t.Errorf("webpSize = %d,%d,%v want %d,%d", w, h, err, c.w, c.h)
		}
	}
	if _, _, err := webpSize([]byte("RIFF....WEBPXXXX")); err == nil {
		t.Error("short header accepted")
	}
}
