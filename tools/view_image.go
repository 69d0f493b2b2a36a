package tools

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"strings"

	"github.com/visorhq/visor/images"
)

//go:embed view_image.md
var viewImageDescription string

// viewImageMaxBytes bounds what one call may push into the context and the vision encoder; larger files are
// almost always photos that should be downscaled first. It is the one image policy's bound.
const viewImageMaxBytes = images.DefaultMaxBytes

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
		return Result{}, fmt.Errorf("%s is %d bytes; images over %d bytes are refused: downscale it first", in.Path,
			st.Size(), viewImageMaxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, viewImageMaxBytes+1))
	if err != nil {
		return Result{}, fmt.Errorf("read %s: %w", in.Path, err)
	}
	// The bytes decide, not the extension (models and users both misname files), and by the same policy as an
	// image a user attaches: a WebP or a bomb is refused here, as a result the model reads, instead of failing
	// the whole request at the engine.
	im, err := images.Limits{MaxBytes: viewImageMaxBytes}.Check(data)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %s", in.Path, strings.TrimPrefix(err.Error(), "image "))
	}
	return Result{
		Text:   fmt.Sprintf("%s: %s, %dx%d px, %d bytes", in.Path, im.MIME, im.Width, im.Height, len(data)),
		Images: []Image{{MIME: im.MIME, Data: im.Data}},
	}, nil
}
