package tools

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // registers the decoder image.DecodeConfig uses
	_ "image/jpeg"
	_ "image/png"
	"io"
	"net/http"
)

//go:embed view_image.md
var viewImageDescription string

// viewImageMaxBytes bounds what one call may push into the context and the vision encoder; larger files are
// almost always photos that should be downscaled first.
const viewImageMaxBytes = 20 << 20

type viewImageIn struct {
	Path string `json:"path" jsonschema_description:"Image path, relative to the workspace root."`
}

func viewImageTool(root string) Tool {
	return New(ViewImageName, describe(viewImageDescription), func(ctx context.Context, in viewImageIn) (Result, error) {
		return viewImage(root, in)
	}, ReturnsImages(), Parallel())
}

func viewImage(root string, in viewImageIn) (Result, error) {
	f, st, err := openRegular(root, in.Path)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	if st.Size() > viewImageMaxBytes {
		return Result{}, fmt.Errorf("%s is %d bytes; images over %d bytes are refused", in.Path, st.Size(), viewImageMaxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, viewImageMaxBytes+1))
	if err != nil {
		return Result{}, fmt.Errorf("read %s: %w", in.Path, err)
	}
	// Sniff the bytes, not the extension: models and users both misname files.
	mime := http.DetectContentType(data)
	var w, h int
	switch mime {
	case "image/png", "image/jpeg", "image/gif":
		cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			return Result{}, fmt.Errorf("%s looks like %s but is corrupt: %w", in.Path, mime, err)
		}
		w, h = cfg.Width, cfg.Height
	case "image/webp":
		if w, h, err = webpSize(data); err != nil {
			return Result{}, fmt.Errorf("%s looks like WebP but is corrupt: %w", in.Path, err)
		}
	default:
		return Result{}, fmt.Errorf("%s is %s, not a PNG, JPEG, GIF or WebP image", in.Path, mime)
	}
	return Result{
		Text:   fmt.Sprintf("%s: %s, %dx%d px, %d bytes", in.Path, mime, w, h, len(data)),
		Images: []Image{{MIME: mime, Data: data}},
	}, nil
}

// webpSize reads the canvas size from a WebP header (lossy VP8, lossless VP8L or extended VP8X); the
// standard library has no WebP decoder and the size is all we need.
func webpSize(b []byte) (int, int, error) {
	if len(b) < 30 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WEBP" {
		return 0, 0, errors.New("no RIFF/WEBP header")
	}
	chunk, p := string(b[12:16]), b[20:]
	switch chunk {
	case "VP8 ":
		if p[3] != 0x9d || p[4] != 0x01 || p[5] != 0x2a {
			return 0, 0, errors.New("bad VP8 start code")
		}
		return int(binary.LittleEndian.Uint16(p[6:]) & 0x3fff), int(binary.LittleEndian.Uint16(p[8:]) & 0x3fff), nil
	case "VP8L":
		if p[0] != 0x2f {
			return 0, 0, errors.New("bad VP8L signature")
		}
		v := binary.LittleEndian.Uint32(p[1:])
		return int(v&0x3fff) + 1, int(v>>14&0x3fff) + 1, nil
	case "VP8X":
		w := int(p[4]) | int(p[5])<<8 | int(p[6])<<16
		h := int(p[7]) | int(p[8])<<8 | int(p[9])<<16
		return w + 1, h + 1, nil
	}
	return 0, 0, fmt.Errorf("unknown WebP chunk %q", chunk)
}
