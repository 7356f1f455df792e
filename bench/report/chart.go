package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"strings"
)

// barChart is a grouped bar chart: one group of bars per label on the x
// axis, one bar per series in each group, and optional horizontal
// reference lines (targets). It is drawn with the standard library only:
// text uses the 5×7 bitmap font below.
type barChart struct {
	Title  string
	YLabel string // written above the y axis
	Note   string // small print at the bottom: where the figures come from
	// Log draws the y axis on a logarithmic scale (ticks 1, 2, 5 × 10^k),
	// for figures that span orders of magnitude, such as latencies against
	// their targets.
	Log    bool
	Groups []string
	Series []barSeries
	Lines  []refLine
}

type barSeries struct {
	Name   string
	Color  color.RGBA
	Values []float64 // one per group; NaN: no bar
}

type refLine struct {
	Label string
	Value float64
	Color color.RGBA
}

var (
	white = color.RGBA{255, 255, 255, 255}
	ink   = color.RGBA{30, 30, 30, 255}
	grid  = color.RGBA{225, 225, 225, 255}
	// palette: blue, orange, green, purple, red.
	palette = []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {148, 103, 189, 255}, {214, 39, 40, 255}}
)

const (
	chartW, chartH = 960, 540
	textScale      = 2 // title, axis and legend text: 10×14 pixel glyphs
)

// writePNG draws c into path.
func (c barChart) writePNG(path string) error {
	img := c.draw()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (c barChart) draw() *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, chartW, chartH))
	fill(img, img.Bounds(), white)
	left, right, top, bottom := 110, chartW-30, 90, chartH-70
	drawText(img, c.Title, left, 20, textScale, ink)
	drawText(img, c.Note, chartW-10-textWidth(c.Note, 1), chartH-12, 1, ink)

	// Legend, under the title, left to right.
	x := left
	for _, s := range c.Series {
		fill(img, image.Rect(x, 52, x+14, 66), s.Color)
		drawText(img, s.Name, x+20, 52, textScale, ink)
		x += 20 + textWidth(s.Name, textScale) + 30
	}

	var y func(float64) int
	var ticks []float64
	if c.Log {
		lo, hi := c.logRange()
		span := math.Log10(hi) - math.Log10(lo)
		y = func(v float64) int {
			v = math.Max(v, lo)
			return bottom - int(math.Round((math.Log10(v)-math.Log10(lo))/span*float64(bottom-top)))
		}
		for p := lo; p <= hi*1.001; p *= 10 {
			for _, m := range []float64{1, 2, 5} {
				if m*p <= hi*1.001 {
					ticks = append(ticks, m*p)
				}
			}
		}
	} else {
		step := niceStep(c.maxValue() / 5)
		yMax := math.Ceil(c.maxValue()/step) * step
		if yMax == 0 {
			yMax, step = 1, 0.2
		}
		y = func(v float64) int { return bottom - int(math.Round(v/yMax*float64(bottom-top))) }
		for v := 0.0; v <= yMax+step/2; v += step {
			ticks = append(ticks, v)
		}
	}

	// Grid and y ticks.
	for _, v := range ticks {
		yy := y(v)
		fill(img, image.Rect(left, yy, right, yy+1), grid)
		label := tickLabel(v)
		drawText(img, label, left-10-textWidth(label, textScale), yy-7, textScale, ink)
	}
	drawText(img, c.YLabel, 10, top-22, textScale, ink) // below the legend
	fill(img, image.Rect(left, top, left+1, bottom+1), ink)
	fill(img, image.Rect(left, bottom, right, bottom+1), ink)

	// Bars.
	groupW := float64(right-left) / float64(len(c.Groups))
	barW := int(groupW * 0.8 / float64(max(1, len(c.Series))))
	for g, name := range c.Groups {
		gx := left + int(float64(g)*groupW+groupW*0.1)
		for s, ser := range c.Series {
			if g >= len(ser.Values) || math.IsNaN(ser.Values[g]) {
				continue
			}
			v := ser.Values[g]
			bx := gx + s*barW
			fill(img, image.Rect(bx+2, y(v), bx+barW-2, bottom), ser.Color)
			label := valueLabel(v)
			drawText(img, label, bx+barW/2-textWidth(label, 1)/2, y(v)-10, 1, ink)
		}
		for i, line := range strings.Split(name, "\n") { // a label may have two lines
			drawText(img, line, left+int(float64(g)*groupW+groupW/2)-textWidth(line, textScale)/2, bottom+10+i*18, textScale, ink)
		}
	}

	// Reference lines, dashed, over the bars, each labelled at the left
	// end on a white patch.
	for _, l := range c.Lines {
		yy := y(l.Value)
		if yy < top {
			continue
		}
		for xx := left; xx < right; xx += 12 {
			fill(img, image.Rect(xx, yy-1, min(xx+7, right), yy+1), l.Color)
		}
		w := textWidth(l.Label, textScale)
		fill(img, image.Rect(left+6, yy-20, left+14+w, yy-3), white)
		drawText(img, l.Label, left+10, yy-18, textScale, l.Color)
	}
	return img
}

// logRange is the powers of ten below the smallest and above the largest
// value or line.
func (c barChart) logRange() (lo, hi float64) {
	lo, hi = math.Inf(1), 0
	for _, s := range c.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) && v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	for _, l := range c.Lines {
		lo, hi = math.Min(lo, l.Value), math.Max(hi, l.Value)
	}
	if hi == 0 {
		return 1, 10
	}
	return math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
}

func (c barChart) maxValue() float64 {
	m := 0.0
	for _, s := range c.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				m = math.Max(m, v)
			}
		}
	}
	for _, l := range c.Lines {
		m = math.Max(m, l.Value)
	}
	return m
}

// niceStep rounds a tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func tickLabel(v float64) string {
	if v >= 1000 && math.Mod(v, 1000) == 0 {
		return fmt.Sprintf("%.0fK", v/1000)
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func valueLabel(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.1fK", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

// drawText writes s with its top-left corner at x, y, each font pixel a
// scale×scale square. Letters are drawn upper-case; a character the font
// lacks is drawn as '?'.
func drawText(img *image.RGBA, s string, x, y, scale int, c color.RGBA) {
	for _, r := range strings.ToUpper(s) {
		g, ok := glyphs[r]
		if !ok {
			g = glyphs['?']
		}
		for row, bits := range strings.Split(g, "|") {
			for col, b := range bits {
				if b == '#' {
					fill(img, image.Rect(x+col*scale, y+row*scale, x+(col+1)*scale, y+(row+1)*scale), c)
				}
			}
		}
		x += 6 * scale
	}
}

func textWidth(s string, scale int) int { return len([]rune(s))*6*scale - scale }

// glyphs is a 5×7 bitmap font: seven rows of five pixels, '#' set.
var glyphs = map[rune]string{
	'0': ".###.|#...#|#..##|#.#.#|##..#|#...#|.###.",
	'1': "..#..|.##..|..#..|..#..|..#..|..#..|.###.",
	'2': ".###.|#...#|....#|...#.|..#..|.#...|#####",
	'3': "####.|....#|....#|.###.|....#|....#|####.",
	'4': "...#.|..##.|.#.#.|#..#.|#####|...#.|...#.",
	'5': "#####|#....|####.|....#|....#|#...#|.###.",
	'6': "..##.|.#...|#....|####.|#...#|#...#|.###.",
	'7': "#####|....#|...#.|..#..|.#...|.#...|.#...",
	'8': ".###.|#...#|#...#|.###.|#...#|#...#|.###.",
	'9': ".###.|#...#|#...#|.####|....#|...#.|.##..",
	'A': ".###.|#...#|#...#|#####|#...#|#...#|#...#",
	'B': "####.|#...#|#...#|####.|#...#|#...#|####.",
	'C': ".###.|#...#|#....|#....|#....|#...#|.###.",
	'D': "####.|#...#|#...#|#...#|#...#|#...#|####.",
	'E': "#####|#....|#....|####.|#....|#....|#####",
	'F': "#####|#....|#....|####.|#....|#....|#....",
	'G': ".###.|#...#|#....|#.###|#...#|#...#|.####",
	'H': "#...#|#...#|#...#|#####|#...#|#...#|#...#",
	'I': ".###.|..#..|..#..|..#..|..#..|..#..|.###.",
	'J': "..###|...#.|...#.|...#.|...#.|#..#.|.##..",
	'K': "#...#|#..#.|#.#..|##...|#.#..|#..#.|#...#",
	'L': "#....|#....|#....|#....|#....|#....|#####",
	'M': "#...#|##.##|#.#.#|#.#.#|#...#|#...#|#...#",
	'N': "#...#|#...#|##..#|#.#.#|#..##|#...#|#...#",
	'O': ".###.|#...#|#...#|#...#|#...#|#...#|.###.",
	'P': "####.|#...#|#...#|####.|#....|#....|#....",
	'Q': ".###.|#...#|#...#|#...#|#.#.#|#..#.|.##.#",
	'R': "####.|#...#|#...#|####.|#.#..|#..#.|#...#",
	'S': ".####|#....|#....|.###.|....#|....#|####.",
	'T': "#####|..#..|..#..|..#..|..#..|..#..|..#..",
	'U': "#...#|#...#|#...#|#...#|#...#|#...#|.###.",
	'V': "#...#|#...#|#...#|#...#|#...#|.#.#.|..#..",
	'W': "#...#|#...#|#...#|#.#.#|#.#.#|#.#.#|.#.#.",
	'X': "#...#|#...#|.#.#.|..#..|.#.#.|#...#|#...#",
	'Y': "#...#|#...#|.#.#.|..#..|..#..|..#..|..#..",
	'Z': "#####|....#|...#.|..#..|.#...|#....|#####",
	' ': ".....|.....|.....|.....|.....|.....|.....",
	'.': ".....|.....|.....|.....|.....|.##..|.##..",
	',': ".....|.....|.....|.....|.##..|..#..|.#...",
	'-': ".....|.....|.....|.###.|.....|.....|.....",
	'/': "....#|....#|...#.|..#..|.#...|#....|#....",
	'(': "...#.|..#..|.#...|.#...|.#...|..#..|...#.",
	')': ".#...|..#..|...#.|...#.|...#.|..#..|.#...",
	':': ".....|.##..|.##..|.....|.##..|.##..|.....",
	'%': "##..#|##..#|...#.|..#..|.#...|#..##|#..##",
	'=': ".....|.....|#####|.....|#####|.....|.....",
	'+': ".....|..#..|..#..|#####|..#..|..#..|.....",
	'<': "...#.|..#..|.#...|#....|.#...|..#..|...#.",
	'>': ".#...|..#..|...#.|....#|...#.|..#..|.#...",
	'_': ".....|.....|.....|.....|.....|.....|#####",
	'?': ".###.|#...#|....#|...#.|..#..|.....|..#..",
	'×': ".....|#...#|.#.#.|..#..|.#.#.|#...#|.....",
	'≤': "...#.|..#..|.#...|..#..|...#.|.....|.####",
}
