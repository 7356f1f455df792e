package main

import (
	"bytes"
	"image/png"
	"math"
	"strings"
	"testing"
)

func TestGlyphsAreFiveBySeven(t *testing.T) {
	for r, g := range glyphs {
		rows := strings.Split(g, "|")
		if len(rows) != 7 {
			t.Errorf("glyph %q: %d rows, want 7", r, len(rows))
		}
		for _, row := range rows {
			if len(row) != 5 || strings.Trim(row, ".#") != "" {
				t.Errorf("glyph %q: row %q is not five of . and #", r, row)
			}
		}
	}
}

func TestBarChartDrawsBarsInTheirColours(t *testing.T) {
	c := barChart{Title: "t", YLabel: "MS", Groups: []string{"100", "1,000"},
		Series: []barSeries{{Name: "a", Color: palette[0], Values: []float64{10, 40}},
			{Name: "b", Color: palette[1], Values: []float64{20, math.NaN()}}},
		Lines: []refLine{{Label: "target", Value: 30, Color: palette[4]}}}
	img := c.draw()
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	count := func(want [4]uint8) int {
		n := 0
		for i := 0; i < len(img.Pix); i += 4 {
			if [4]uint8(img.Pix[i:i+4]) == want {
				n++
			}
		}
		return n
	}
	a, b := palette[0], palette[1]
	na, nb := count([4]uint8{a.R, a.G, a.B, a.A}), count([4]uint8{b.R, b.G, b.B, b.A})
	// Series a has two bars (10 and 40) against b's one of 20: a's area
	// is 2.5 times b's, give or take the legend squares.
	if na == 0 || nb == 0 || float64(na)/float64(nb) < 2 || float64(na)/float64(nb) > 3 {
		t.Errorf("bar pixels: a %d, b %d; want a about 2.5 × b", na, nb)
	}
}

func TestNiceStep(t *testing.T) {
	for raw, want := range map[float64]float64{0.3: 0.5, 7: 10, 12: 20, 45: 50, 8000: 10000} {
		if got := niceStep(raw); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", raw, got, want)
		}
	}
}
