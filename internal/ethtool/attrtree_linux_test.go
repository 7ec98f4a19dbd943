//go:build linux

package ethtool

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// flattenAttrs turns an attribute stream into sorted "path=hex" lines:
// the path is the attribute types from the top level down, joined by "/";
// nests (NLA_F_NESTED) are descended into, other payloads printed in hex.
// Two requests with the same attributes give the same lines whatever the
// attributes' order.
func flattenAttrs(b []byte) ([]string, error) {
	var out []string
	var walk func(b []byte, path string) error
	walk = func(b []byte, path string) error {
		pos := 0
		for pos < len(b) {
			if pos+4 > len(b) {
				return fmt.Errorf("%s: %d trailing bytes", path, len(b)-pos)
			}
			l := int(binary.NativeEndian.Uint16(b[pos:]))
			typ := binary.NativeEndian.Uint16(b[pos+2:])
			if l < 4 || pos+l > len(b) {
				return fmt.Errorf("%s: attribute length %d at %d of %d", path, l, pos, len(b))
			}
			p := strconv.Itoa(int(typ & nlaTypeMask))
			if path != "" {
				p = path + "/" + p
			}
			if typ&nlaFNested != 0 {
				if err := walk(b[pos+4:pos+l], p); err != nil {
					return err
				}
			} else {
				out = append(out, p+"="+hex.EncodeToString(b[pos+4:pos+l]))
			}
			pos += (l + 3) &^ 3
		}
		return nil
	}
	if err := walk(b, ""); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

func attrTreeStrings(t *testing.T, b []byte) []string {
	t.Helper()
	s, err := flattenAttrs(b)
	if err != nil {
		t.Fatalf("flatten attributes: %v", err)
	}
	return s
}

// straceMsg is one netlink message a traced program sent.
type straceMsg struct {
	typ     string // strace's nlmsg_type, e.g. "ethtool" or "nlctrl"
	cmd     uint8  // generic netlink command
	version uint8
	attrs   []byte // after the generic netlink header
}

var straceRE = regexp.MustCompile(`nlmsg_type=([a-z0-9_x]+), nlmsg_flags=[^,]*, nlmsg_seq=\d+, nlmsg_pid=\d+\}, "((?:\\x[0-9a-f]{2})*)"`)

// parseStrace extracts the netlink messages from the output of
// `strace -e trace=sendto,sendmsg -xx -s 65536`.
func parseStrace(out string) ([]straceMsg, error) {
	var msgs []straceMsg
	for _, m := range straceRE.FindAllStringSubmatch(out, -1) {
		raw, err := hex.DecodeString(strings.ReplaceAll(m[2], `\x`, ""))
		if err != nil {
			return nil, err
		}
		if len(raw) < genlHeaderLen {
			return nil, fmt.Errorf("message of %d bytes", len(raw))
		}
		msgs = append(msgs, straceMsg{typ: m[1], cmd: raw[0], version: raw[1], attrs: raw[genlHeaderLen:]})
	}
	return msgs, nil
}
