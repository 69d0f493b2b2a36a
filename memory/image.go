package memory

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/visorhq/visor/images"
)

// imageInfo fills MIME, Width and Height from the bytes where it can. An image it cannot read is still
// stored (the bytes are what matter); the caller's values are kept for fields it cannot determine.
func imageInfo(img Image) Image {
	if h, err := images.ReadHeader(img.Data); err == nil {
		if h.Width > 0 && h.Height > 0 {
			img.Width, img.Height = h.Width, h.Height
		}
		if img.MIME == "" {
			img.MIME = h.MIME
		}
		return img
	}
	if img.MIME == "" {
		img.MIME = http.DetectContentType(img.Data)
	}
	return img
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// extensionFor is the file extension used when exporting an image.
func extensionFor(mime string) string {
	switch mime {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/bmp":
		return ".bmp"
	case "image/webp":
		return ".webp"
	}
	return ".bin"
}
