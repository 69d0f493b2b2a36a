package vram

import (
	"fmt"
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

// IntakeSize is the size image intake sends a w×h image at: no larger than the encoder will use, so the server
// does not parse, decode and hash pixels it would throw away on every turn, and never smaller on either side
// than what llama.cpp's own resize gives, so nothing the encoder would see is lost. A dynamic-resolution encoder
// gets exactly its resized size (capped at capPixels when that is positive and lower than its own limit); a
// fixed-size one keeps the aspect ratio with the shorter side at ImageSize. An image already within it keeps
// its size.
func (p *Projector) IntakeSize(w, h, capPixels int) (int, int) {
	if w <= 0 || h <= 0 {
		return w, h
	}
	if p.Dynamic {
		q := *p
		if capPixels > 0 && (q.MaxPixels <= 0 || capPixels < q.MaxPixels) {
			q.MaxPixels = capPixels
		}
		rw, rh := q.ResizedSize(w, h)
		if rw > w || rh > h {
			return w, h
		}
		return rw, rh
	}
	if p.ImageSize <= 0 {
		return w, h
	}
	scale := max(float64(p.ImageSize)/float64(w), float64(p.ImageSize)/float64(h))
	if scale >= 1 {
		return w, h
	}
	return min(w, int(math.Ceil(float64(w)*scale))), min(h, int(math.Ceil(float64(h)*scale)))
}

// ProjectorFromFile reads a projector GGUF's image facts (header only).
func ProjectorFromFile(path string) (*Projector, error) {
	f, err := factsFromPath(path)
	if err != nil {
		return nil, err
	}
	if f.Projector == nil {
		return nil, fmt.Errorf("vram: %s is not a vision projector (no clip.vision keys)", path)
	}
	return f.Projector, nil
}
