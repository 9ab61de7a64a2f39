package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"strings"
)

// WritePNG draws the report as two grouped bar charts — commits/s and p50
// commit latency, one group per writer count, one bar per system — with
// the standard library only (a built-in 3×5 pixel font labels it).
func (r *CommitsReport) WritePNG(w io.Writer) error {
	const width, height = 1000, 440
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)

	systems, writers := r.axes()
	left := image.Rect(10, 10, width/2-5, height-10)
	right := image.Rect(width/2+5, 10, width-10, height-10)
	drawPanel(img, left, "commits/s", systems, writers, r.lookup(func(b CommitsRun) float64 { return b.CommitsPerSec }))
	drawPanel(img, right, "p50 latency ms", systems, writers, r.lookup(func(b CommitsRun) float64 { return b.P50MS }))
	return png.Encode(w, img)
}

var palette = []color.RGBA{
	{0x33, 0x66, 0xcc, 0xff}, // postgres: blue
	{0xdc, 0x39, 0x12, 0xff}, // second system: red
	{0xff, 0x99, 0x00, 0xff},
	{0x10, 0x96, 0x18, 0xff},
}

func (r *CommitsReport) axes() (systems []string, writers []int) {
	seenS, seenW := map[string]bool{}, map[int]bool{}
	for _, run := range r.Runs {
		if !seenS[run.System] {
			seenS[run.System] = true
			systems = append(systems, run.System)
		}
		if !seenW[run.Writers] {
			seenW[run.Writers] = true
			writers = append(writers, run.Writers)
		}
	}
	return systems, writers
}

func (r *CommitsReport) lookup(v func(CommitsRun) float64) func(system string, writers int) (float64, bool) {
	return func(system string, writers int) (float64, bool) {
		run, ok := r.medianRun(system, writers)
		if !ok {
			return 0, false
		}
		return v(run), true
	}
}

func drawPanel(img *image.RGBA, area image.Rectangle, title string, systems []string, writers []int, value func(string, int) (float64, bool)) {
	black := color.RGBA{0, 0, 0, 0xff}
	grey := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	const scale = 2
	drawText(img, area.Min.X+10, area.Min.Y+4, title, black, 3)

	// Legend.
	lx := area.Min.X + 10
	ly := area.Min.Y + 30
	for i, s := range systems {
		fill(img, image.Rect(lx, ly, lx+12, ly+10), palette[i%len(palette)])
		drawText(img, lx+16, ly, s, black, scale)
		lx += 16 + textWidth(s, scale) + 20
	}

	plot := image.Rect(area.Min.X+60, area.Min.Y+55, area.Max.X-10, area.Max.Y-30)
	maxV := 0.0
	for _, s := range systems {
		for _, w := range writers {
			if v, ok := value(s, w); ok {
				maxV = max(maxV, v)
			}
		}
	}
	if maxV <= 0 {
		maxV = 1
	}
	maxV = niceCeil(maxV)
	for i := 0; i <= 4; i++ {
		y := plot.Max.Y - i*plot.Dy()/4
		fill(img, image.Rect(plot.Min.X, y, plot.Max.X, y+1), grey)
		label := formatNum(maxV * float64(i) / 4)
		drawText(img, plot.Min.X-6-textWidth(label, scale), y-5, label, black, scale)
	}
	fill(img, image.Rect(plot.Min.X, plot.Min.Y, plot.Min.X+1, plot.Max.Y+1), black)
	fill(img, image.Rect(plot.Min.X, plot.Max.Y, plot.Max.X, plot.Max.Y+1), black)
	if len(writers) == 0 || len(systems) == 0 {
		return
	}
	groupW := plot.Dx() / len(writers)
	barW := max(4, (groupW-20)/len(systems))
	for gi, w := range writers {
		gx := plot.Min.X + gi*groupW + 10
		for si, s := range systems {
			v, ok := value(s, w)
			if !ok {
				continue
			}
			h := int(v / maxV * float64(plot.Dy()))
			x0 := gx + si*barW
			fill(img, image.Rect(x0+1, plot.Max.Y-h, x0+barW-1, plot.Max.Y), palette[si%len(palette)])
			label := formatNum(v)
			drawText(img, x0+(barW-textWidth(label, scale))/2, plot.Max.Y-h-14, label, black, scale)
		}
		wl := fmt.Sprintf("writers=%d", w)
		drawText(img, gx+(groupW-20-textWidth(wl, scale))/2, plot.Max.Y+8, wl, black, scale)
	}
}

func niceCeil(v float64) float64 {
	p := 1.0
	for p*10 <= v {
		p *= 10
	}
	for p > v*10 {
		p /= 10
	}
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func formatNum(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	draw.Draw(img, r.Intersect(img.Bounds()), image.NewUniform(c), image.Point{}, draw.Src)
}

// glyphs is a 3×5 pixel font: five rows of three pixels each.
var glyphs = map[rune]string{
	'0': "111101101101111", '1': "010110010010111", '2': "111001111100111", '3': "111001111001111",
	'4': "101101111001001", '5': "111100111001111", '6': "111100111101111", '7': "111001001001001",
	'8': "111101111101111", '9': "111101111001111",
	'a': "010101111101101", 'b': "110101110101110", 'c': "011100100100011", 'd': "110101101101110",
	'e': "111100110100111", 'f': "111100110100100", 'g': "011100101101011", 'h': "101101111101101",
	'i': "111010010010111", 'j': "001001001101010", 'k': "101101110101101", 'l': "100100100100111",
	'm': "101111111101101", 'n': "110101101101101", 'o': "010101101101010", 'p': "110101110100100",
	'q': "010101101110011", 'r': "110101110101101", 's': "011100010001110", 't': "111010010010010",
	'u': "101101101101111", 'v': "101101101101010", 'w': "101101111111101", 'x': "101101010101101",
	'y': "101101010010010", 'z': "111001010100111",
	'/': "001001010100100", '=': "000111000111000", '.': "000000000000010", '-': "000000111000000",
	':': "000010000010000", '(': "010100100100010", ')': "010001001001010", '%': "101001010100101",
	'_': "000000000000111", ' ': "000000000000000",
}

func textWidth(s string, scale int) int { return len([]rune(s)) * 4 * scale }

func drawText(img *image.RGBA, x, y int, s string, c color.RGBA, scale int) {
	for _, ch := range strings.ToLower(s) {
		g, ok := glyphs[ch]
		if !ok {
			g = glyphs['-']
		}
		for i, bit := range g {
			if bit != '1' {
				continue
			}
			px, py := x+(i%3)*scale, y+(i/3)*scale
			fill(img, image.Rect(px, py, px+scale, py+scale), c)
		}
		x += 4 * scale
	}
}
