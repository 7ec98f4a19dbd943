//go:build linux

package ethtool

import (
	"fmt"
	"os"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"github.com/xdpio/xdpio/internal/genl/genlfuzz"
	"golang.org/x/sys/unix"
)

// The reply decoders take bytes from the kernel. Fuzzing checks that
// truncated and garbage attributes give errors, never panics, and that a
// decoder never accepts a stream whose top-level attribute framing is
// broken. Seeds: replies the real kernel sent for eth0 and the test veth
// (testdata/fuzz, written by TestWriteFuzzSeeds with XDPIO_WRITE_SEEDS=1),
// the replies the unit tests build, and their truncations.

var (
	addSeeds     = genlfuzz.AddSeeds
	checkDecode  = genlfuzz.CheckDecode
	seedAttrs    = genlfuzz.Attrs
	framingValid = genlfuzz.FramingValid
)

func FuzzDecodeChannels(f *testing.F) {
	addSeeds(f, seedAttrs(func(ae *netlink.AttributeEncoder) {
		ae.Uint32(unix.ETHTOOL_A_CHANNELS_RX_MAX, 4)
		ae.Uint32(unix.ETHTOOL_A_CHANNELS_RX_COUNT, 2)
	}), seedAttrs(func(ae *netlink.AttributeEncoder) { ae.Uint16(unix.ETHTOOL_A_CHANNELS_TX_COUNT, 2) }))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := decodeChannels(b)
		checkDecode(t, b, err)
	})
}

func FuzzDecodeRings(f *testing.F) {
	addSeeds(f, seedAttrs(encodeRings(RingsConfig{RX: u32p(1), TXPush: boolp(true)})))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := decodeRings(b)
		checkDecode(t, b, err)
	})
}

func FuzzDecodeCoalesce(f *testing.F) {
	addSeeds(f, seedAttrs(encodeCoalesce(Coalesce{RXUsecs: u32p(5), UseAdaptiveRX: boolp(true),
		RXProfile: []IRQModeration{{Usec: u32p(1), Pkts: u32p(2)}}})))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := decodeCoalesce(b)
		checkDecode(t, b, err)
	})
}

func FuzzDecodeRSS(f *testing.F) {
	hf := HashToeplitz
	addSeeds(f, seedAttrs(encodeRSSSet(RSSConfig{HFunc: &hf, Indir: []uint32{0, 1, 0, 1}, Key: []byte{1, 2, 3, 4}})))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := decodeRSS(b)
		checkDecode(t, b, err)
	})
}

func FuzzDecodeFeatures(f *testing.F) {
	addSeeds(f, seedAttrs(func(ae *netlink.AttributeEncoder) {
		for typ := uint16(unix.ETHTOOL_A_FEATURES_HW); typ <= unix.ETHTOOL_A_FEATURES_NOCHANGE; typ++ {
			ae.Nested(typ, func(b *netlink.AttributeEncoder) error {
				b.Flag(unix.ETHTOOL_A_BITSET_NOMASK, true)
				b.Uint32(unix.ETHTOOL_A_BITSET_SIZE, 3)
				b.Bytes(unix.ETHTOOL_A_BITSET_VALUE, []byte{5, 0, 0, 0})
				return nil
			})
		}
	}))
	names := []string{"a", "b", "c"}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := decodeFeatures(b, names)
		checkDecode(t, b, err)
		_, err = decodeFeaturesSetReply(b, names)
		checkDecode(t, b, err)
		_, _ = decodeBitset(b)
	})
}

func FuzzDecodeStringSet(f *testing.F) {
	addSeeds(f, seedAttrs(func(ae *netlink.AttributeEncoder) {
		ae.Nested(unix.ETHTOOL_A_STRSET_STRINGSETS, func(s *netlink.AttributeEncoder) error {
			s.Nested(unix.ETHTOOL_A_STRINGSETS_STRINGSET, func(n *netlink.AttributeEncoder) error {
				n.Uint32(unix.ETHTOOL_A_STRINGSET_ID, ssFeatures)
				n.Uint32(unix.ETHTOOL_A_STRINGSET_COUNT, 1)
				n.Nested(unix.ETHTOOL_A_STRINGSET_STRINGS, func(ss *netlink.AttributeEncoder) error {
					ss.Nested(unix.ETHTOOL_A_STRINGS_STRING, func(e *netlink.AttributeEncoder) error {
						e.Uint32(unix.ETHTOOL_A_STRING_INDEX, 0)
						e.String(unix.ETHTOOL_A_STRING_VALUE, "rx-gro")
						return nil
					})
					return nil
				})
				return nil
			})
			return nil
		})
	}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := decodeStringSet(b, ssFeatures)
		checkDecode(t, b, err)
	})
}

// TestWriteFuzzSeeds records real kernel replies (eth0 read-only) as seed
// corpus files. It runs only with XDPIO_WRITE_SEEDS=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("XDPIO_WRITE_SEEDS") != "1" {
		t.Skip("set XDPIO_WRITE_SEEDS=1 to record kernel replies as fuzz seeds")
	}
	c, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dev := Device{Name: "eth0"}
	strset := func(id uint32) func(ae *netlink.AttributeEncoder) {
		return func(ae *netlink.AttributeEncoder) {
			ae.Nested(unix.ETHTOOL_A_STRSET_STRINGSETS, func(n *netlink.AttributeEncoder) error {
				n.Nested(unix.ETHTOOL_A_STRINGSETS_STRINGSET, func(s *netlink.AttributeEncoder) error {
					s.Uint32(unix.ETHTOOL_A_STRINGSET_ID, id)
					return nil
				})
				return nil
			})
		}
	}
	for _, x := range []struct {
		target string
		r      request
	}{
		{"FuzzDecodeChannels", request{cmd: unix.ETHTOOL_MSG_CHANNELS_GET, dev: dev}},
		{"FuzzDecodeRings", request{cmd: unix.ETHTOOL_MSG_RINGS_GET, dev: dev}},
		{"FuzzDecodeCoalesce", request{cmd: unix.ETHTOOL_MSG_COALESCE_GET, dev: dev}},
		{"FuzzDecodeRSS", request{cmd: unix.ETHTOOL_MSG_RSS_GET, dev: dev}},
		{"FuzzDecodeFeatures", request{cmd: unix.ETHTOOL_MSG_FEATURES_GET, dev: dev, flags: FlagCompactBitsets}},
		{"FuzzDecodeFeatures", request{cmd: unix.ETHTOOL_MSG_FEATURES_GET, dev: dev}},
		{"FuzzDecodeStringSet", request{cmd: unix.ETHTOOL_MSG_STRSET_GET, dev: dev, encode: strset(ssFeatures)}},
	} {
		msgs, err := c.do(x.r)
		if err != nil {
			t.Fatalf("%s: %v", x.target, err)
		}
		genlfuzz.WriteSeed(t, ".", x.target, fmt.Sprintf("kernel-eth0-%s-flags%d", opName(x.r.cmd), x.r.flags), msgs[0].Data)
	}
	_, ops, err := lookupFamilyRaw(c)
	if err != nil {
		t.Fatal(err)
	}
	// internal/genl's FuzzDecodeFamily decodes the controller's replies.
	genlfuzz.WriteSeed(t, "../genl", "FuzzDecodeFamily", "kernel-ethtool-family", ops)
}

// lookupFamilyRaw returns the raw attributes of the controller's answer
// for the ethtool family.
func lookupFamilyRaw(c *Client) (genetlink.Family, []byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.CTRL_ATTR_FAMILY_NAME, unix.ETHTOOL_GENL_NAME)
	b, _ := ae.Encode()
	msgs, err := c.Execute(genetlink.Message{Header: genetlink.Header{Command: unix.CTRL_CMD_GETFAMILY, Version: 1}, Data: b}, unix.GENL_ID_CTRL, netlink.Request)
	if err != nil {
		return genetlink.Family{}, nil, err
	}
	return genetlink.Family{}, msgs[0].Data, nil
}

// FuzzDecodeNotification: a monitor notification of any kind with any
// payload decodes to a Notification or an error, never a panic, and a
// notification accepted with a payload has whole attribute framing.
func FuzzDecodeNotification(f *testing.F) {
	hdr := seedAttrs(func(ae *netlink.AttributeEncoder) {
		ae.Nested(headerAttr, func(b *netlink.AttributeEncoder) error {
			b.Uint32(unix.ETHTOOL_A_HEADER_DEV_INDEX, 2)
			b.String(unix.ETHTOOL_A_HEADER_DEV_NAME, "veth0")
			return nil
		})
		ae.Uint32(unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT, 4)
	})
	for _, cmd := range []uint8{msgChannelsNtf, msgRingsNtf, msgCoalesceNtf, msgFeaturesNtf, msgRSSNtf, msgRSSCreateNtf, msgRSSDeleteNtf, 0, 255} {
		f.Add(cmd, hdr)
		f.Add(cmd, hdr[:len(hdr)/2])
	}
	// A reply with broken framing that the family decoder once accepted
	// (internal/genl's FuzzDecodeFamily corpus), as channels and features
	// notifications.
	for _, cmd := range []uint8{msgChannelsNtf, msgFeaturesNtf} {
		f.Add(cmd, []byte("\x06\x00\x01\x000000\f\x000000000000\x00\x0000"))
	}
	names := []string{"a", "b", "c"}
	f.Fuzz(func(t *testing.T, cmd uint8, b []byte) {
		n, err := decodeNotification(genetlink.Message{Header: genetlink.Header{Command: cmd}, Data: b}, names)
		if err == nil && n.Kind != "other" && len(b) > 0 && !framingValid(b) {
			t.Fatalf("notification %d (%s) accepted broken framing: %x", cmd, n.Kind, b)
		}
		if err == nil && n.Cmd != cmd {
			t.Fatalf("notification %d decoded as command %d", cmd, n.Cmd)
		}
	})
}
