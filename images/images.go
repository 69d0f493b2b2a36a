// Package images is visor's one image-intake policy: every image that enters a conversation — from a file on the
// command line, a web page, an MCP client, a gateway request or a tool — is checked here before it may reach the
// engine or the store. An image is decoded fully (not just sniffed), so a truncated or corrupt file is refused at
// intake instead of being rejected by llama-server later; its pixel count is read from the header before any
// pixel is decoded, so a decompression bomb costs nothing; and its bytes are kept exactly as given, so later
// turns send the same bytes and hit the server's image cache.
//
// An image larger than the encoder will use is resized once, here (Limits.Fit), and re-encoded as PNG: the
// server would shrink it anyway on every request, after parsing, decoding and hashing megabytes the encoder never
// sees. Otherwise the bytes are kept exactly. It does not know where an image came from: callers name the input in
// their errors.
package images

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // the formats llama-server's image loader (stb_image) decodes
	_ "image/jpeg"
	"image/png"
	"io/fs"
	"os"
	"strings"

	_ "golang.org/x/image/bmp"
	"golang.org/x/image/draw"

	"github.com/visorhq/visor/internal/safefile"
)

// Formats names the accepted formats for messages: the ones llama-server's loader decodes (stb_image), which
// is why WebP, decoded by browsers, is not among them.
const Formats = "PNG, JPEG, GIF or BMP"

// Limits bound one image. The zero value of a field means its default.
type Limits struct {
	// MaxBytes bounds the encoded file; default DefaultMaxBytes.
	MaxBytes int64
	// MaxPixels bounds width×height; default DefaultMaxPixels.
	MaxPixels int64
	// Fit, when set, gives the size an image of w×h pixels is sent at (the encoder's input size, from the
	// projector); an image it makes smaller is resized once, at intake. Nil keeps every image as given.
	Fit func(w, h int) (int, int)
}

const (
	// DefaultMaxBytes is the documented per-image limit of every front end.
	DefaultMaxBytes = 20 << 20
	// DefaultMaxPixels admits an 8K screenshot (7680×4320 = 33 M) and refuses bombs: decoding costs 4 bytes a pixel.
	DefaultMaxPixels = 40_000_000
)

func (l Limits) maxBytes() int64 {
	if l.MaxBytes > 0 {
		return l.MaxBytes
	}
	return DefaultMaxBytes
}

func (l Limits) maxPixels() int64 {
	if l.MaxPixels > 0 {
		return l.MaxPixels
	}
	return DefaultMaxPixels
}

// Image is an accepted image: its bytes and what decoding found.
type Image struct {
	MIME          string
	Data          []byte
	Width, Height int
	// OrigWidth and OrigHeight are the size given, when Fit resized the image (zero otherwise).
	OrigWidth, OrigHeight int
}

// Resized says whether intake resized the image.
func (im Image) Resized() bool { return im.OrigWidth != 0 }

// Sentinel errors, wrapped by every refusal so callers can tell the kinds apart.
var (
	ErrEmpty      = errors.New("image is empty")
	ErrTooLarge   = errors.New("image is too large")
	ErrNotImage   = errors.New("not an image visor accepts")
	ErrCorrupt    = errors.New("image is corrupt or truncated")
	ErrTooBig     = errors.New("image has too many pixels")
	ErrUnreadable = errors.New("image file cannot be read")
)

var mimes = map[string]string{"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "bmp": "image/bmp"}

// Check accepts data as an image or says why not; the message ends with what to do.
func (l Limits) Check(data []byte) (Image, error) {
	if len(data) == 0 {
		return Image{}, fmt.Errorf("%w: give a %s file", ErrEmpty, Formats)
	}
	if int64(len(data)) > l.maxBytes() {
		return Image{}, fmt.Errorf("%w: %s, more than the %s allowed: send a smaller or downscaled %s file",
			ErrTooLarge, mib(int64(len(data))), mib(l.maxBytes()), Formats)
	}
	cfg, err := ReadHeader(data)
	switch {
	case errors.Is(err, ErrNotImage):
		return Image{}, fmt.Errorf("%w: convert it to a %s file", err, Formats)
	case err != nil:
		return Image{}, fmt.Errorf("%w: re-export or re-capture the image", err)
	case !cfg.Accepted():
		return Image{}, fmt.Errorf("%w (%s): convert it to a %s file", ErrNotImage, sniff(data), Formats)
	}
	mime := cfg.MIME
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return Image{}, fmt.Errorf("%w: it says it is %d×%d pixels: re-export or re-capture the image", ErrCorrupt, cfg.Width, cfg.Height)
	}
	if px := int64(cfg.Width) * int64(cfg.Height); px > l.maxPixels() {
		return Image{}, fmt.Errorf("%w: %d×%d is %d pixels, more than the %d allowed: downscale it", ErrTooBig,
			cfg.Width, cfg.Height, px, l.maxPixels())
	}
	// Decoding every pixel is what finds a truncated file: headers alone look fine.
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return Image{}, fmt.Errorf("%w: %v: re-export or re-capture the image", ErrCorrupt, err)
	}
	im := Image{MIME: mime, Data: data, Width: cfg.Width, Height: cfg.Height}
	if l.Fit == nil {
		return im, nil
	}
	w, h := l.Fit(cfg.Width, cfg.Height)
	if w <= 0 || h <= 0 || w > cfg.Width || h > cfg.Height || (w == cfg.Width && h == cfg.Height) {
		return im, nil
	}
	out, err := resize(img, w, h)
	if err != nil {
		return Image{}, fmt.Errorf("images: resize %d×%d to %d×%d: %w", cfg.Width, cfg.Height, w, h, err)
	}
	return Image{MIME: "image/png", Data: out, Width: w, Height: h, OrigWidth: cfg.Width, OrigHeight: cfg.Height}, nil
}

// resize scales img to w×h with Catmull-Rom (a downscale filter that keeps text legible) and encodes it as PNG,
// lossless, so the one resampling is the only change.
func resize(img image.Image, w, h int) ([]byte, error) {
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.CatmullRom.Scale(dst, dst.Bounds(), img, img.Bounds(), draw.Src, nil)
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, dst); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ReadFile reads and checks an image file.
func (l Limits) ReadFile(path string) (Image, error) {
	data, err := l.Read(path)
	if err != nil {
		return Image{}, err
	}
	return l.Check(data)
}

// Read reads an image file's bytes for a later Check (which may be another service's, so an image is decoded
// once): it opens only regular files, without blocking (a FIFO or device would otherwise hang the command), and
// reads at most the byte limit.
func (l Limits) Read(path string) ([]byte, error) {
	data, err := safefile.ReadFile(path, l.maxBytes())
	switch {
	case errors.Is(err, safefile.ErrTooLarge):
		size := "it is"
		if st, serr := os.Stat(path); serr == nil {
			size = mib(st.Size()) + ","
		}
		return nil, fmt.Errorf("%w: %s more than the %s allowed: send a smaller or downscaled %s file", ErrTooLarge,
			size, mib(l.maxBytes()), Formats)
	case err != nil && isURL(path):
		// The shell had no file by that name; the model's view_image may be handed a link too.
		return nil, fmt.Errorf("%w: it is a URL, and visor reads image files: download it first (curl -o shot.png URL) and give the file", ErrUnreadable)
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: no such file: check the path", ErrUnreadable)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	return data, nil
}

func isURL(path string) bool {
	p := strings.ToLower(path)
	return strings.HasPrefix(p, "http://") || strings.HasPrefix(p, "https://")
}

// mib shows a byte count as people read limits: "20 MiB", "20.5 MiB", or bytes when small.
func mib(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
