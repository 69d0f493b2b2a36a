package swap

import "time"

// RequestCost is one request's time to first token outside the server's prompt evaluation and first token
// (llama-server's timings): what it spent receiving, decoding and hashing the request's images and text
// before evaluating anything, with the images it carried.
type RequestCost struct {
	Images   int
	Overhead time.Duration
}

// OverheadOf is a request's RequestCost from its time to first token as the client saw it and the server's
// prompt time and generation (tokens, total time): the first token's share of the generation is taken out.
func OverheadOf(images int, ttft time.Duration, promptMS float64, predicted int, predictedMS float64) RequestCost {
	first := 0.0
	if predicted > 0 {
		first = predictedMS / float64(predicted)
	}
	d := ttft - time.Duration((promptMS+first)*float64(time.Millisecond))
	return RequestCost{Images: images, Overhead: max(d, 0)}
}

// minCostPoints is how many requests, over at least two image counts, CachedImageCost needs.
const minCostPoints = 4

// CachedImageCost is the cost of one image a request carries, measured: the least-squares slope of the
// requests' overhead against their image count. It is the per-request price the image window weighs (ChooseWindow's
// CachedImage), measured on this engine instead of taken from another machine. ok is false until there are
// minCostPoints requests with at least two different image counts; a negative slope (noise) counts as zero.
func CachedImageCost(pts []RequestCost) (time.Duration, bool) {
	if len(pts) < minCostPoints {
		return 0, false
	}
	var n, sx, sy, sxx, sxy float64
	for _, p := range pts {
		x, y := float64(p.Images), float64(p.Overhead)
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	den := n*sxx - sx*sx
	if den <= 0 {
		return 0, false // one image count only: no slope
	}
	return max(time.Duration((n*sxy-sx*sy)/den), 0), true
}
