package bench

import (
	"image"
	"image/color"
	"image/png"
	"io"
)

var (
	pgColor      = color.RGBA{0x33, 0x67, 0x91, 0xff} // PostgreSQL blue
	moraineColor = color.RGBA{0xe0, 0x7b, 0x24, 0xff}
	axisColor    = color.RGBA{0x40, 0x40, 0x40, 0xff}
)

// Bar is one pair of bars in a chart: PostgreSQL's value and moraine's.
type Bar struct {
	Postgres, Moraine float64
}

// WriteBarsPNG draws a horizontal bar chart, one pair of bars per entry
// (PostgreSQL blue above moraine orange), scaled to the largest value. It
// carries no text (the standard library has no font); the JSON output and
// the table name the entries, in the same order from top to bottom.
func WriteBarsPNG(w io.Writer, bars []Bar) error {
	const width, barH, gap, margin = 800, 10, 8, 20
	height := 2*margin + len(bars)*(2*barH+gap)
	img := image.NewRGBA(image.Rect(0, 0, width, max(height, 2*margin+1)))
	fill(img, img.Bounds(), color.RGBA{0xff, 0xff, 0xff, 0xff})
	var top float64
	for _, b := range bars {
		top = max(top, b.Postgres, b.Moraine)
	}
	fill(img, image.Rect(margin-2, margin, margin, height-margin), axisColor)
	span := float64(width - 2*margin)
	for i, b := range bars {
		y := margin + i*(2*barH+gap)
		for j, v := range []float64{b.Postgres, b.Moraine} {
			n := 0
			if top > 0 {
				n = int(v / top * span)
			}
			c := pgColor
			if j == 1 {
				c = moraineColor
			}
			fill(img, image.Rect(margin, y+j*barH, margin+max(n, 1), y+(j+1)*barH-1), c)
		}
	}
	return png.Encode(w, img)
}
