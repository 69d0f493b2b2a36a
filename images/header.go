package images

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"net/http"
)

// Header is what an image's first bytes say, read without decoding a pixel.
type Header struct {
	// Format is "png", "jpeg", "gif", "bmp" or "webp".
	Format        string
	MIME          string
	Width, Height int
}

// Accepted says whether the format is one visor sends to the engine (see Formats).
func (h Header) Accepted() bool { _, ok := mimes[h.Format]; return ok }

// ReadHeader reads an image's format and size from its header: the formats visor accepts, and WebP, which it
// refuses for messages but must still name (and size, for images stored before it was refused; 0×0 when its
// header is cut short). It is the one
// place that knows image headers, so a refusal, the store and a tool describe an image the same way.
func ReadHeader(data []byte) (Header, error) {
	if isWebP(data) {
		// Sizes stay 0 where the header cannot be read: the format alone is enough to refuse it.
		w, h, _ := webpSize(data)
		return Header{Format: "webp", MIME: "image/webp", Width: w, Height: h}, nil
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if errors.Is(err, image.ErrFormat) {
		return Header{}, fmt.Errorf("%w (%s)", ErrNotImage, sniff(data))
	}
	if err != nil {
		return Header{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return Header{Format: format, MIME: mimeOf(format), Width: cfg.Width, Height: cfg.Height}, nil
}

func mimeOf(format string) string {
	if m, ok := mimes[format]; ok {
		return m
	}
	return "image/" + format
}

func isWebP(b []byte) bool {
	return len(b) >= 12 && string(b[0:4]) == "RIFF" && string(b[8:12]) == "WEBP"
}

// webpSize reads the canvas size from a WebP header (lossy VP8, lossless VP8L or extended VP8X): 30 bytes are
// enough, and the standard library has no WebP decoder to register.
func webpSize(b []byte) (w, h int, ok bool) {
	if len(b) < 30 || !isWebP(b) {
		return 0, 0, false
	}
	chunk, p := string(b[12:16]), b[20:]
	switch chunk {
	case "VP8 ":
		// Frame tag (3 bytes), start code 9d 01 2a, then 14-bit width and height (the top bits are the scale).
		if p[3] != 0x9d || p[4] != 0x01 || p[5] != 0x2a {
			return 0, 0, false
		}
		return int(binary.LittleEndian.Uint16(p[6:]) & 0x3fff), int(binary.LittleEndian.Uint16(p[8:]) & 0x3fff), true
	case "VP8L":
		if p[0] != 0x2f {
			return 0, 0, false
		}
		v := binary.LittleEndian.Uint32(p[1:])
		return int(v&0x3fff) + 1, int(v>>14&0x3fff) + 1, true
	case "VP8X":
		w := int(p[4]) | int(p[5])<<8 | int(p[6])<<16
		h := int(p[7]) | int(p[8])<<8 | int(p[9])<<16
		return w + 1, h + 1, true
	}
	return 0, 0, false
}

func sniff(data []byte) string {
	switch {
	case isWebP(data):
		return "WebP, which llama-server cannot decode"
	case bytes.HasPrefix(data, []byte("%PDF")):
		return "a PDF"
	}
	return "the bytes look like " + http.DetectContentType(data)
}
