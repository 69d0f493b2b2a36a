package tools

import (
	"bytes"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/visorhq/visor/internal/testimage"
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

func TestViewImage(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var jb, gb bytes.Buffer
	must(t, jpeg.Encode(&jb, testImage(32, 16), nil))
	must(t, gif.Encode(&gb, testImage(8, 8), nil))
	pngData := pngBytes(t, 64, 48)
	files := map[string][]byte{
		"shot.png": pngData, "photo.jpg": jb.Bytes(), "anim.gif": gb.Bytes(), "tiny.webp": testimage.WebP(),
		"misnamed.jpg": pngData, "notes.png": []byte("just text"), "broken.png": pngData[:20],
		"bomb.png": testimage.BombPNG(20000, 20000),
	}
	for n, b := range files {
		must(t, os.WriteFile(filepath.Join(root, n), b, 0o644))
	}
	r := builtinRegistry(t, BuiltinConfig{Root: root})

	cases := []struct{ path, mime, text string }{
		{"shot.png", "image/png", "shot.png: image/png, 64x48 px"},
		{"photo.jpg", "image/jpeg", "photo.jpg: image/jpeg, 32x16 px"},
		{"anim.gif", "image/gif", "anim.gif: image/gif, 8x8 px"},
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
	// The one image policy (images.Check): what llama-server cannot decode, or a decoder would choke on, is a
	// result the model reads, naming the file and the fix.
	mustFail(t, call(t, r, ViewImageName, map[string]any{"path": "notes.png"}), "notes.png", "text/plain", "PNG, JPEG, GIF or BMP")
	mustFail(t, call(t, r, ViewImageName, map[string]any{"path": "broken.png"}), "broken.png", "corrupt")
	mustFail(t, call(t, r, ViewImageName, map[string]any{"path": "tiny.webp"}), "tiny.webp", "WebP, which llama-server cannot decode", "convert it")
	mustFail(t, call(t, r, ViewImageName, map[string]any{"path": "bomb.png"}), "bomb.png", "20000×20000", "downscale")
}
