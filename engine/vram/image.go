package vram

import (
	"math"
	"strings"
)

// Qwen-VL's dynamic resolution in llama.cpp (clip.cpp, set_limit_image_tokens): an image keeps its aspect ratio
// and is resized to a multiple of patch·merge pixels with between qwenMinTokens and qwenMaxTokens tokens, unless
// the mmproj names its own pixel limits or llama-server is given --image-min-tokens/--image-max-tokens. At load
// it reserves the encoder's compute buffer for a qwenWarmupTokens image (46×46 merged patches: 1472² px for
// patch 16, seen in llama-server's log as "warmup with image size = 1472 x 1472"); a larger image grows the
// buffer at its first encode, which is what the plan must budget for.
const (
	qwenMinTokens    = 8
	qwenMaxTokens    = 4096
	qwenWarmupTokens = 46 * 46
)

// dynamicResolution reports the projector types whose image size follows the input (Qwen2-VL, Qwen2.5-VL,
// Qwen3-VL mergers) rather than a fixed image_size.
func dynamicResolution(projType string) bool {
	return strings.HasPrefix(projType, "qwen2vl") || strings.HasPrefix(projType, "qwen2.5vl") ||
		strings.HasPrefix(projType, "qwen25vl") || strings.HasPrefix(projType, "qwen3vl")
}

// factor is the side in pixels of one image token: patch × merge.
func (p *Projector) factor() int { return p.PatchSize * max(p.MergeSize, 1) }

// ImageTokens is the number of tokens llama.cpp turns a w×h image into with this projector, after its resize:
// a fixed-size encoder always gives TokensPerImage; a dynamic-resolution one rounds each side to a multiple of
// patch·merge and scales the image down to MaxPixels or up to MinPixels, keeping the aspect ratio.
func (p *Projector) ImageTokens(w, h int) int {
	if !p.Dynamic || w <= 0 || h <= 0 {
		return p.TokensPerImage
	}
	fw, fh := p.ResizedSize(w, h)
	f := p.factor()
	return (fw / f) * (fh / f)
}

// ResizedSize is the size in pixels llama.cpp encodes a w×h image at (Qwen-VL's smart resize). For a
// fixed-size encoder it is ImageSize×ImageSize.
func (p *Projector) ResizedSize(w, h int) (int, int) {
	if !p.Dynamic || w <= 0 || h <= 0 {
		return p.ImageSize, p.ImageSize
	}
	f := float64(p.factor())
	round := func(v float64) int { return max(int(math.Round(v/f)), 1) * int(f) }
	rw, rh := round(float64(w)), round(float64(h))
	area := float64(w) * float64(h)
	switch {
	case p.MaxPixels > 0 && rw*rh > p.MaxPixels:
		beta := math.Sqrt(area / float64(p.MaxPixels))
		rw = max(int(math.Floor(float64(w)/beta/f)), 1) * int(f)
		rh = max(int(math.Floor(float64(h)/beta/f)), 1) * int(f)
	case p.MinPixels > 0 && rw*rh < p.MinPixels:
		beta := math.Sqrt(float64(p.MinPixels) / area)
		rw = int(math.Ceil(float64(w)*beta/f)) * int(f)
		rh = int(math.Ceil(float64(h)*beta/f)) * int(f)
	}
	return rw, rh
}

// imageLimits fills the dynamic-resolution fields of a projector read from a header: min/max pixels from the
// file when it names them, else llama.cpp's defaults for the projector type.
func (p *Projector) imageLimits(minPixels, maxPixels int) {
	f := p.factor()
	p.Dynamic = dynamicResolution(p.Type) && f > 0
	if !p.Dynamic {
		p.MaxPixels = p.ImageSize * p.ImageSize
		p.MaxImageTokens, p.WarmupTokens = p.TokensPerImage, p.TokensPerImage
		return
	}
	p.MinPixels, p.MaxPixels = minPixels, maxPixels
	if p.MinPixels <= 0 {
		p.MinPixels = qwenMinTokens * f * f
	}
	if p.MaxPixels <= 0 {
		p.MaxPixels = qwenMaxTokens * f * f
	}
	p.MaxImageTokens = p.MaxPixels / (f * f)
	p.WarmupTokens = qwenWarmupTokens
}

// imageBudget is what the plan sizes the encoder for: the tokens of the largest image a session may send and
// the pixel cap intake must enforce, from the projector's limits and an optional cap (Options.MaxImagePixels).
// capTokens is non-zero when the cap is below the projector's own limit, so llama-server must be told
// (--image-max-tokens) to resize as intake does.
func imageBudget(p *Projector, capPixels int) (tokens, pixels, capTokens int) {
	tokens, pixels = p.MaxImageTokens, p.MaxPixels
	if !p.Dynamic || capPixels <= 0 || capPixels >= p.MaxPixels {
		return tokens, pixels, 0
	}
	f := p.factor()
	capTokens = max(capPixels/(f*f), qwenMinTokens)
	return capTokens, capTokens * f * f, capTokens
}

// encoderPatches is the number of ViT patches the encoder's compute buffer is sized for: the larger of the
// warm-up image llama.cpp reserves at load and the largest image the session may send.
func encoderPatches(p *Projector, tokens int) int {
	m := max(p.MergeSize, 1)
	return max(tokens, p.WarmupTokens) * m * m
}
