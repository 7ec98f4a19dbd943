package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Set holds the samples of one scrape in flat slices that Reset keeps for
// the next, so that a steady exporter allocates nothing for them. The zero
// value is empty and ready. A Set is not safe for concurrent use.
type Set struct {
	samples []sample
	labels  []string
}

type sample struct {
	f      *Family
	v      float64
	lo, hi int // the label values: labels[lo:hi]
}

// Reset empties s and keeps its memory.
func (s *Set) Reset() {
	clear(s.labels) // drop the strings for the collector
	s.samples, s.labels = s.samples[:0], s.labels[:0]
}

// Add appends a sample of family f with value v and f's label values, in
// the order of f.Labels. It panics if the count of values differs from
// f's labels: that is a bug in the caller, not an input.
func (s *Set) Add(f *Family, v float64, values ...string) {
	if len(values) != len(f.Labels) {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", f.Name, len(f.Labels), len(values)))
	}
	lo := len(s.labels)
	s.labels = append(s.labels, values...)
	s.samples = append(s.samples, sample{f: f, v: v, lo: lo, hi: len(s.labels)})
}

// Len returns the number of samples.
func (s *Set) Len() int { return len(s.samples) }

// At returns sample i: its family, value and label values (valid until
// the next Reset).
func (s *Set) At(i int) (f *Family, v float64, values []string) {
	sm := &s.samples[i]
	return sm.f, sm.v, s.labels[sm.lo:sm.hi:sm.hi]
}

// SetValue changes the value of sample i.
func (s *Set) SetValue(i int, v float64) { s.samples[i].v = v }

// WriteText writes the samples in Prometheus's text exposition format
// (version 0.0.4): families sorted by name, each with its HELP and TYPE
// lines once, its samples in the order they were added. Families of the
// same name must agree in type and labels, or WriteText fails before it
// writes anything.
func (s *Set) WriteText(w io.Writer) error {
	order := make([]int, len(s.samples))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return s.samples[order[a]].f.Name < s.samples[order[b]].f.Name
	})
	for i := 1; i < len(order); i++ {
		a, b := s.samples[order[i-1]].f, s.samples[order[i]].f
		if a != b && a.Name == b.Name && (a.Type != b.Type || strings.Join(a.Labels, ",") != strings.Join(b.Labels, ",")) {
			return fmt.Errorf("metrics: two families named %s differ in type or labels", a.Name)
		}
	}
	bw := bufio.NewWriter(w)
	var prev string
	var num []byte
	for _, i := range order {
		sm := &s.samples[i]
		f := sm.f
		if f.Name != prev {
			prev = f.Name
			bw.WriteString("# HELP ")
			bw.WriteString(f.Name)
			bw.WriteByte(' ')
			writeEscaped(bw, f.Help, false)
			bw.WriteString("\n# TYPE ")
			bw.WriteString(f.Name)
			bw.WriteByte(' ')
			bw.WriteString(f.Type.String())
			bw.WriteByte('\n')
		}
		bw.WriteString(f.Name)
		if len(f.Labels) > 0 {
			bw.WriteByte('{')
			for j, name := range f.Labels {
				if j > 0 {
					bw.WriteByte(',')
				}
				bw.WriteString(name)
				bw.WriteString(`="`)
				writeEscaped(bw, s.labels[sm.lo+j], true)
				bw.WriteByte('"')
			}
			bw.WriteByte('}')
		}
		bw.WriteByte(' ')
		num = AppendValue(num[:0], sm.v)
		bw.Write(num)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// writeEscaped writes s escaped as the text format wants: a backslash and
// a line feed always, a double quote in label values; bytes that are not
// UTF-8 (an interface name may hold any) become U+FFFD.
func writeEscaped(w *bufio.Writer, s string, quote bool) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			w.WriteString(`\\`)
		case c == '\n':
			w.WriteString(`\n`)
		case c == '"' && quote:
			w.WriteString(`\"`)
		default:
			w.WriteByte(c)
		}
	}
}

// AppendValue appends v as the text format writes a sample value: whole
// numbers exactly (1234567, not 1.234567e+06), others in Go's shortest
// form, NaN, +Inf and -Inf.
func AppendValue(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case v == math.Trunc(v) && math.Abs(v) < 1<<63:
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
