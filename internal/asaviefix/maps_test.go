package asaviefix

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Lines in the format proc(5) documents, including its own example lines.
func TestParseMapsLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Mapping
	}{
		{"00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon",
			Mapping{Span{0x400000, 0x452000}, "r-xp", 0, 173521, "/usr/bin/dbus-daemon"}},
		{"00e03000-00e24000 rw-p 00000000 00:00 0           [heap]",
			Mapping{Span{0xe03000, 0xe24000}, "rw-p", 0, 0, "[heap]"}},
		{"35b1a21000-35b1a22000 rw-p 00000000 00:00 0",
			Mapping{Span{0x35b1a21000, 0x35b1a22000}, "rw-p", 0, 0, ""}},
		{"7f2c1c000000-7f2c1c001000 rw-s 100000000 00:08 412345                     socket:[412345]",
			Mapping{Span{0x7f2c1c000000, 0x7f2c1c001000}, "rw-s", 0x100000000, 412345, "socket:[412345]"}},
		{"7f00-8f00 r--p 0 fd:01 99 /tmp/a file with spaces (deleted)",
			Mapping{Span{0x7f00, 0x8f00}, "r--p", 0, 99, "/tmp/a file with spaces (deleted)"}},
	} {
		got, err := ParseMapsLine(tc.line)
		if err != nil {
			t.Errorf("%q: %v", tc.line, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%q: (-want +got)\n%s", tc.line, d)
		}
	}
	for _, bad := range []string{"", "00400000-00452000 r-xp 0 08:02", "00400000 r-xp 0 08:02 1 x",
		"zz-00452000 r-xp 0 08:02 1", "2000-1000 r-xp 0 08:02 1", "1000-2000 r-xpx 0 08:02 1", "1000-2000 r-xp 0 08:02 -1"} {
		if m, err := ParseMapsLine(bad); !errors.Is(err, ErrMapsLine) {
			t.Errorf("%q: got %+v, %v; want ErrMapsLine", bad, m, err)
		}
	}
}

// FuzzParseMapsLine: no panics; a parsed line, written back in the
// kernel's format, parses to the same mapping.
func FuzzParseMapsLine(f *testing.F) {
	f.Add("00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon")
	f.Add("7f2c1c000000-7f2c1c001000 rw-s 100000000 00:08 412345 socket:[412345]")
	f.Add("35b1a21000-35b1a22000 rw-p 00000000 00:00 0")
	f.Fuzz(func(t *testing.T, line string) {
		m, err := ParseMapsLine(line)
		if err != nil {
			if !errors.Is(err, ErrMapsLine) {
				t.Fatalf("error %v does not wrap ErrMapsLine", err)
			}
			return
		}
		if m.End < m.Start {
			t.Fatalf("range %x-%x", m.Start, m.End)
		}
		again := fmt.Sprintf("%08x-%08x %s %08x 00:00 %d", m.Start, m.End, m.Perms, m.Offset, m.Inode)
		if m.Path != "" {
			again += "     " + m.Path
		}
		m2, err := ParseMapsLine(again)
		if err != nil {
			t.Fatalf("%q reformatted as %q: %v", line, again, err)
		}
		if d := cmp.Diff(m, m2); d != "" {
			t.Fatalf("%q reformatted as %q: (-first +second)\n%s", line, again, d)
		}
	})
}
