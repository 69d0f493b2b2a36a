package main

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math/rand/v2"
)

// screenshot draws a desktop-like picture of w×h: a wallpaper gradient, a top bar, overlapping windows with title
// bars, sidebars, lines of "text" made of glyph-sized marks, buttons and icons. The seed varies the layout and the
// text, so two screenshots of one size are different images to the server's cache.
func screenshot(w, h int, seed uint64) ([]byte, error) {
	rng := rand.New(rand.NewPCG(seed, 7))
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetRGBA(x, y, color.RGBA{uint8(30 + 40*y/h), uint8(60 + 50*x/w), uint8(110 + 60*y/h), 255})
		}
	}
	fill := func(r image.Rectangle, c color.RGBA) { draw.Draw(img, r, &image.Uniform{c}, image.Point{}, draw.Src) }
	fill(image.Rect(0, 0, w, 28), color.RGBA{24, 24, 28, 255})
	for i := range 12 {
		fill(image.Rect(8+i*90, 6, 8+i*90+70, 22), color.RGBA{200, 200, 205, 255})
	}
	palette := []color.RGBA{{250, 250, 250, 255}, {40, 42, 54, 255}, {245, 240, 230, 255}, {30, 30, 30, 255}}
	for win := range 3 + rng.IntN(3) {
		x0, y0 := rng.IntN(w/3), 40+rng.IntN(h/4)
		x1, y1 := min(w-10, x0+w/3+rng.IntN(w/2)), min(h-10, y0+h/3+rng.IntN(h/2))
		bg := palette[rng.IntN(len(palette))]
		ink := color.RGBA{255 - bg.R, 255 - bg.G, 255 - bg.B, 255}
		fill(image.Rect(x0+6, y0+6, x1+6, y1+6), color.RGBA{0, 0, 0, 255}) // shadow
		fill(image.Rect(x0, y0, x1, y1), bg)
		fill(image.Rect(x0, y0, x1, y0+30), color.RGBA{uint8(60 + 40*win), 70, 90, 255})
		for b := range 3 {
			fill(image.Rect(x1-24-b*22, y0+8, x1-10-b*22, y0+22), color.RGBA{230, uint8(80 + 60*b), 80, 255})
		}
		side := x0 + (x1-x0)/5
		fill(image.Rect(x0, y0+30, side, y1), color.RGBA{bg.R / 2, bg.G / 2, bg.B / 2, 255})
		for y := y0 + 44; y+12 < y1; y += 20 {
			// A line of words: glyph marks 6–9 px wide, gaps between words, ragged right edge.
			x := side + 16
			end := x1 - 20 - rng.IntN(max((x1-side)/3, 1))
			for x < end {
				for range 2 + rng.IntN(8) {
					gw := 6 + rng.IntN(4)
					fill(image.Rect(x, y+rng.IntN(3), x+gw-2, y+12), ink)
					x += gw
				}
				x += 8
			}
			if rng.IntN(7) == 0 {
				fill(image.Rect(side+16, y, side+120, y+16), color.RGBA{50, 120, 220, 255}) // a button
			}
		}
		for y := y0 + 44; y+16 < y1; y += 28 {
			fill(image.Rect(x0+10, y, x0+26, y+16), color.RGBA{uint8(rng.IntN(256)), 160, uint8(rng.IntN(256)), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
