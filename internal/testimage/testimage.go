// Package testimage holds image bytes for tests that imports none of visor's packages, so that every
// package's tests can use it, tools' and images' own included (internal/testkit imports both).
package testimage

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
)

// BombPNG is a valid PNG header claiming w×h pixels with no pixel data: DecodeConfig must refuse it before any
// allocation of w×h×4 bytes.
func BombPNG(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 6 // 8-bit RGBA
	chunk := func(typ string, data []byte) {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		_ = binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	}
	chunk("IHDR", ihdr)
	chunk("IEND", nil)
	return b.Bytes()
}

// WebP is a real 1×1 lossless WebP (the one browser feature tests use), which llama-server's loader cannot
// decode; the standard library cannot encode WebP. Each call returns a fresh copy.
func WebP() []byte {
	return []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")
}
