package tools

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
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
		"bomb.png": bombPNG(20000, 20000),
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

// bombPNG is a valid PNG header claiming w×h pixels with no pixel data (internal/testkit.BombPNG, which this
// package cannot import).
func bombPNG(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 6
	for _, c := range []struct {
		typ  string
		data []byte
	}{{"IHDR", ihdr}, {"IEND", nil}} {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(c.data)))
		b.WriteString(c.typ)
		b.Write(c.data)
		_ = binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(c.typ), c.data...)))
	}
	return b.Bytes()
}
