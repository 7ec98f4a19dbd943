//go:build linux

package genl

import (
	"encoding/binary"
	"github.com/xdpio/xdpio/internal/netnstest"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/xdpio/xdpio/internal/genl/genlfuzz"
	"golang.org/x/sys/unix"
)

// The kernel's own controller describes its families: nlctrl always
// exists, with CTRL_CMD_GETFAMILY among its operations, and ethtool on
// every kernel this project supports. A family that does not exist is the
// kernel's ENOENT.
func TestLookupFamily(t *testing.T) {
	c, err := genetlink.Dial(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, ops, err := LookupFamily(c, "nlctrl")
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != unix.GENL_ID_CTRL || !ops[unix.CTRL_CMD_GETFAMILY] {
		t.Errorf("nlctrl: id %d, ops %v; want id %d with CTRL_CMD_GETFAMILY", f.ID, ops, unix.GENL_ID_CTRL)
	}
	want, err := c.GetFamily(unix.ETHTOOL_GENL_NAME)
	if err != nil {
		netnstest.SkipIfKernelBefore(t, "5.6", "the ethtool netlink family")
		t.Fatalf("no ethtool family on a kernel that has one: %v", err)
	}
	f, ops, err = LookupFamily(c, unix.ETHTOOL_GENL_NAME)
	if err != nil || f.ID != want.ID || f.Version != want.Version || len(f.Groups) != len(want.Groups) || !ops[unix.ETHTOOL_MSG_LINKINFO_GET] {
		t.Errorf("ethtool: %+v, %d ops, %v; genetlink says %+v", f, len(ops), err, want)
	}
	if _, _, err := LookupFamily(c, "no-such-family"); err == nil {
		t.Error("a family that does not exist was found")
	}
}

// NewDecoder refuses what the kernel never sends and the netlink package
// would skip silently: a zero-length attribute, a length past the end, a
// nest that does not hold whole attributes.
func TestNewDecoderFraming(t *testing.T) {
	attr := func(typ uint16, payload []byte) []byte {
		b := make([]byte, 4, 4+len(payload)+3)
		binary.NativeEndian.PutUint16(b, uint16(4+len(payload)))
		binary.NativeEndian.PutUint16(b[2:], typ)
		b = append(b, payload...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	good := append(attr(1, []byte{1, 2, 3, 4}), attr(2|NLAFNested, attr(3, []byte("x")))...)
	if _, err := NewDecoder(good); err != nil {
		t.Fatalf("whole attributes refused: %v", err)
	}
	zero := []byte{0, 0, 1, 0}
	badNest := attr(2|NLAFNested, []byte{8, 0, 1, 0})
	for name, b := range map[string][]byte{"zero length": zero, "past the end": good[:6], "bad nest": badNest} {
		if _, err := NewDecoder(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzDecodeFamily: any reply decodes to a family with an ID or to an
// error, never a panic, and a reply with broken attribute framing is
// refused. Seeds: the controller's replies for the ethtool and netdev
// families (written by their packages' TestWriteFuzzSeeds) and their
// truncations.
func FuzzDecodeFamily(f *testing.F) {
	f.Add([]byte{6, 0, 1, 0, 16, 0, 0, 0})
	f.Add([]byte{})
	f.Add([]byte{0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		fam, _, err := DecodeFamily(b)
		genlfuzz.CheckDecode(t, b, err)
		if err == nil && fam.ID == 0 {
			t.Fatalf("decoded a family without an ID from %x", b)
		}
	})
}
