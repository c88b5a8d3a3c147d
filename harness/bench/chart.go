package bench

import (
	"fmt"
	"image/color"
)

// Series is one named line of points (x in seconds, y any unit) for
// LineChart.
type Series struct {
	Name   string
	Points [][2]float64
}

// palette colours LineChart's lines in order (it repeats past its end).
var palette = []color.NRGBA{rateColor, p99Color, p50Color, errorColor, maxColor,
	{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, {R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}, {R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}}

// LineChart renders series over [0, end] seconds as an inline SVG element,
// the same chart the HTML reports draw (the web console's plots use it).
func LineChart(title, ylabel string, end float64, series []Series) (string, error) {
	lines := make([]line, 0, len(series))
	for i, s := range series {
		l := line{name: s.Name, c: palette[i%len(palette)]}
		for _, p := range s.Points {
			l.add(p[0], p[1], false)
		}
		if len(l.segs) > 0 {
			lines = append(lines, l)
		}
	}
	svg, err := chart(title, ylabel, end, nil, false, lines...)
	if err != nil {
		return "", fmt.Errorf("bench: line chart %q: %w", title, err)
	}
	return svg, nil
}
