package launch

import (
	"log/slog"

	"github.com/visorhq/visor/engine/vram"
	"github.com/visorhq/visor/internal/userpath"
)

// ImageSizing is what the projector's header says about images, read once: Fit sizes an image at intake to what
// the encoder uses (vram.Projector.IntakeSize), Tokens is how many prompt tokens it then takes. Both are nil when
// the header cannot be read: images then go at their own size with estimated tokens, and the engine's load
// reports the file.
type ImageSizing struct {
	Fit    func(w, h int) (int, int)
	Tokens func(w, h int) int
}

// ProjectorSizing reads the image facts of the projector file mmproj.
func ProjectorSizing(mmproj string, logger *slog.Logger) ImageSizing {
	p, err := vram.ProjectorFromFile(userpath.Expand(mmproj))
	if err != nil {
		logger.Debug("the projector's image facts are unknown", "mmproj", mmproj, "err", err)
		return ImageSizing{}
	}
	return ImageSizing{Fit: func(w, h int) (int, int) { return p.IntakeSize(w, h, 0) }, Tokens: p.ImageTokens}
}
