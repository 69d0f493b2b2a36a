package memory

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"image"
	_ "image/gif" // DecodeConfig formats
	_ "image/jpeg"
	_ "image/png"
	"net/http"
)

// imageInfo fills MIME, Width and Height from the bytes where it can. An image it cannot decode is still
// stored (the bytes are what matter); the caller's values are kept for fields it cannot determine.
func imageInfo(img Image) Image {
	if cfg, format, err := image.DecodeConfig(bytes.NewReader(img.Data)); err == nil {
		img.Width, img.Height = cfg.Width, cfg.Height
		if img.MIME == "" {
			img.MIME = "image/" + format
		}
		return img
	}
	if w, h, ok := webpSize(img.Data); ok {
		img.Width, img.Height = w, h
		if img.MIME == "" {
			img.MIME = "image/webp"
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

// webpSize reads the dimensions from a WebP header (lossy VP8, lossless VP8L, extended VP8X). Reading
// 30 bytes here avoids a dependency and a registration of a global image decoder.
func webpSize(b []byte) (w, h int, ok bool) {
	if len(b) < 30 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WEBP" {
		return 0, 0, false
	}
	chunk := b[12:]
	switch string(chunk[0:4]) {
	case "VP8 ":
		// Frame tag (3 bytes), start code 9d 01 2a, then 14-bit width and height.
		p := chunk[8:]
		if p[3] != 0x9d || p[4] != 0x01 || p[5] != 0x2a {
			return 0, 0, false
		}
		return int(binary.LittleEndian.Uint16(p[6:8]) & 0x3fff), int(binary.LittleEndian.Uint16(p[8:10]) & 0x3fff), true
	case "VP8L":
		p := chunk[8:]
		if p[0] != 0x2f {
			return 0, 0, false
		}
		bits := binary.LittleEndian.Uint32(p[1:5])
		return int(bits&0x3fff) + 1, int((bits>>14)&0x3fff) + 1, true
	case "VP8X":
		p := chunk[8:]
		w := int(uint32(p[4]) | uint32(p[5])<<8 | uint32(p[6])<<16)
		h := int(uint32(p[7]) | uint32(p[8])<<8 | uint32(p[9])<<16)
		return w + 1, h + 1, true
	}
	return 0, 0, false
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
	case "image/webp":
		return ".webp"
	}
	return ".bin"
}
