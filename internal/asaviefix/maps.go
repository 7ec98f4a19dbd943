package asaviefix

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Span is a range of virtual addresses, [Start, End).
type Span struct{ Start, End uint64 }

// Mapping is one line of /proc/PID/maps.
type Mapping struct {
	Span
	// Perms is the permission field, e.g. "rw-s".
	Perms string
	// Offset is the offset in the mapped file (for a socket: the ring's
	// page offset, XDP_PGOFF_RX_RING and so on).
	Offset uint64
	// Inode of the mapped file; 0 for anonymous memory.
	Inode uint64
	// Path is the pathname field: a file, "socket:[INODE]", "[heap]", or
	// empty.
	Path string
}

// ErrMapsLine is wrapped by errors about a malformed maps line.
var ErrMapsLine = errors.New("malformed /proc/PID/maps line")

// ParseMapsLine parses one line of /proc/PID/maps, as proc(5) describes
// it: "address perms offset dev inode pathname", addresses and offset in
// hexadecimal, the pathname possibly empty or containing spaces.
func ParseMapsLine(line string) (Mapping, error) {
	var m Mapping
	bad := func(what string) (Mapping, error) {
		return Mapping{}, fmt.Errorf("%w: %s in %q", ErrMapsLine, what, line)
	}
	f := strings.Fields(line)
	if len(f) < 5 {
		return bad("fewer than 5 fields")
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return bad("address range without '-'")
	}
	var err1, err2, err3, err4 error
	m.Start, err1 = strconv.ParseUint(lo, 16, 64)
	m.End, err2 = strconv.ParseUint(hi, 16, 64)
	m.Offset, err3 = strconv.ParseUint(f[2], 16, 64)
	m.Inode, err4 = strconv.ParseUint(f[4], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return bad("bad number")
	}
	if m.End < m.Start {
		return bad("range end below start")
	}
	if len(f[1]) != 4 {
		return bad("permissions not 4 characters")
	}
	m.Perms = f[1]
	if len(f) > 5 {
		// The pathname is the rest of the line after the inode, which
		// may contain spaces (and " (deleted)").
		// Skip the five fields the same way Fields split them.
		rest := line
		for i := 0; i < 5; i++ {
			rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
			rest = rest[strings.IndexFunc(rest, unicode.IsSpace):]
		}
		m.Path = strings.TrimRightFunc(strings.TrimLeftFunc(rest, unicode.IsSpace), unicode.IsSpace)
	}
	return m, nil
}
