//go:build linux

package ethtool

import (
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func u32b(v uint32) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, v)
	return b
}

// header decodes the request header nest.
func headerOf(t *testing.T, attrs []byte) map[uint16][]byte {
	t.Helper()
	return attrMap(t, attrMap(t, attrs)[headerAttr])
}

func TestChannelsGetSet(t *testing.T) {
	reply := func(t *testing.T) []byte {
		return encodeAttrs(t, func(ae *netlink.AttributeEncoder) {
			ae.Nested(headerAttr, func(n *netlink.AttributeEncoder) error {
				n.Uint32(unix.ETHTOOL_A_HEADER_DEV_INDEX, 7)
				n.String(unix.ETHTOOL_A_HEADER_DEV_NAME, "veth-a")
				return nil
			})
			ae.Uint32(unix.ETHTOOL_A_CHANNELS_RX_MAX, 8)
			ae.Uint32(unix.ETHTOOL_A_CHANNELS_TX_MAX, 6)
			ae.Uint32(unix.ETHTOOL_A_CHANNELS_RX_COUNT, 4)
			ae.Uint32(unix.ETHTOOL_A_CHANNELS_TX_COUNT, 3)
			ae.Uint32(unix.ETHTOOL_A_CHANNELS_COMBINED_MAX, 2)
			ae.Uint32(unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT, 1)
		})
	}
	fk := &fakeKernel{handle: func(cmd uint8, attrs []byte) fakeAnswer {
		if cmd == unix.ETHTOOL_MSG_CHANNELS_GET {
			return fakeAnswer{replies: []genetlink.Message{{Header: genetlink.Header{Command: msgChannelsGetReply, Version: 1}, Data: reply(t)}}}
		}
		return fakeAnswer{}
	}}
	c := fk.client(t)
	got, err := c.Channels(Device{Name: "veth-a"})
	if err != nil {
		t.Fatal(err)
	}
	want := Channels{RXMax: 8, TXMax: 6, CombinedMax: 2, RX: 4, TX: 3, Combined: 1}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Channels (-want +got):\n%s", d)
	}
	rx := uint32(2)
	if err := c.SetChannels(Device{Index: 7}, ChannelsConfig{RX: &rx}); err != nil {
		t.Fatal(err)
	}
	reqs := fk.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	get, set := reqs[0], reqs[1]
	if get.Header.Command != unix.ETHTOOL_MSG_CHANNELS_GET || set.Header.Command != unix.ETHTOOL_MSG_CHANNELS_SET {
		t.Errorf("commands %d, %d", get.Header.Command, set.Header.Command)
	}
	if h := headerOf(t, get.Data); string(h[unix.ETHTOOL_A_HEADER_DEV_NAME]) != "veth-a\x00" || h[unix.ETHTOOL_A_HEADER_DEV_INDEX] != nil {
		t.Errorf("GET header %v", h)
	}
	if h := headerOf(t, set.Data); !cmp.Equal(h[unix.ETHTOOL_A_HEADER_DEV_INDEX], u32b(7)) || h[unix.ETHTOOL_A_HEADER_DEV_NAME] != nil {
		t.Errorf("SET header %v", h)
	}
	// Only the field that was set goes out: the kernel keeps the others.
	m := attrMap(t, set.Data)
	delete(m, headerAttr)
	if d := cmp.Diff(map[uint16][]byte{unix.ETHTOOL_A_CHANNELS_RX_COUNT: u32b(2)}, m); d != "" {
		t.Errorf("SET attributes (-want +got):\n%s", d)
	}
}

// uapiWidth is the payload size of each COALESCE attribute per the type
// comments of include/uapi/linux/ethtool_netlink.h (u32 / u8).
var uapiCoalesceWidth = map[uint16]int{
	2: 4, 3: 4, 4: 4, 5: 4, 6: 4, 7: 4, 8: 4, 9: 4, 10: 4, // usecs/frames (+irq), stats block
	11: 1, 12: 1, // use-adaptive rx/tx (u8)
	13: 4, 14: 4, 15: 4, 16: 4, 17: 4, 18: 4, 19: 4, 20: 4, 21: 4, 22: 4, 23: 4, // rate low/high, sample interval
	24: 1, 25: 1, // use-cqe-mode tx/rx (u8)
	26: 4, 27: 4, 28: 4, // tx-aggr max bytes/frames, time usecs
}

func TestCoalesceEveryAttribute(t *testing.T) {
	// Set every field to a distinct value, encode, and check each
	// attribute's number and width against the uapi; then feed the same
	// attributes back as a reply and require the identical struct.
	var cfg Coalesce
	for i, a := range coalesceU32 {
		*a.field(&cfg) = u32p(uint32(100 + i))
	}
	for i, a := range coalesceBool {
		*a.field(&cfg) = boolp(i%2 == 0)
	}
	cfg.RXProfile = []IRQModeration{{Usec: u32p(1), Pkts: u32p(2), Comps: u32p(3)}, {Usec: u32p(4)}}
	cfg.TXProfile = []IRQModeration{{Pkts: u32p(5)}}
	var sent []byte
	fk := &fakeKernel{handle: func(cmd uint8, attrs []byte) fakeAnswer {
		switch cmd {
		case unix.ETHTOOL_MSG_COALESCE_SET:
			sent = attrs
		case unix.ETHTOOL_MSG_COALESCE_GET:
			return fakeAnswer{replies: []genetlink.Message{{Header: genetlink.Header{Command: msgCoalesceGetReply, Version: 1}, Data: sent}}}
		}
		return fakeAnswer{}
	}}
	c := fk.client(t)
	if err := c.SetCoalesce(Device{Name: "eth9"}, cfg); err != nil {
		t.Fatal(err)
	}
	m := attrMap(t, sent)
	for typ, w := range uapiCoalesceWidth {
		v, ok := m[typ]
		if !ok {
			t.Errorf("%s not sent", coalesceTree.name(typ))
			continue
		}
		if len(v) != w {
			t.Errorf("%s has %d bytes, uapi says %d", coalesceTree.name(typ), len(v), w)
		}
	}
	if len(m) != len(uapiCoalesceWidth)+3 { // + header + two profiles
		t.Errorf("sent %d attributes, want %d", len(m), len(uapiCoalesceWidth)+3)
	}
	if v := m[unix.ETHTOOL_A_COALESCE_RX_USECS]; !cmp.Equal(v, u32b(100)) {
		t.Errorf("rx-usecs payload %x", v)
	}
	got, err := c.Coalesce(Device{Name: "eth9"})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(cfg, got); d != "" {
		t.Errorf("round trip (-sent +decoded):\n%s", d)
	}
	// A Set with one field sends one attribute.
	sent = nil
	if err := c.SetCoalesce(Device{Name: "eth9"}, Coalesce{UseAdaptiveRX: boolp(true)}); err != nil {
		t.Fatal(err)
	}
	m = attrMap(t, sent)
	delete(m, headerAttr)
	if d := cmp.Diff(map[uint16][]byte{unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX: {1}}, m); d != "" {
		t.Errorf("single-field SET (-want +got):\n%s", d)
	}
}

func TestRingsEncodeDecode(t *testing.T) {
	tds := TCPDataSplitEnabled
	cfg := RingsConfig{RX: u32p(512), RXMini: u32p(16), RXJumbo: u32p(32), TX: u32p(1024), RXBufLen: u32p(4096),
		TCPDataSplit: &tds, CQESize: u32p(128), TXPush: boolp(true), RXPush: boolp(false), TXPushBufLen: u32p(256), HDSThresh: u32p(300)}
	want := map[uint16][]byte{
		unix.ETHTOOL_A_RINGS_RX: u32b(512), unix.ETHTOOL_A_RINGS_RX_MINI: u32b(16), unix.ETHTOOL_A_RINGS_RX_JUMBO: u32b(32),
		unix.ETHTOOL_A_RINGS_TX: u32b(1024), unix.ETHTOOL_A_RINGS_RX_BUF_LEN: u32b(4096),
		unix.ETHTOOL_A_RINGS_TCP_DATA_SPLIT: {2}, unix.ETHTOOL_A_RINGS_CQE_SIZE: u32b(128),
		unix.ETHTOOL_A_RINGS_TX_PUSH: {1}, unix.ETHTOOL_A_RINGS_RX_PUSH: {0},
		unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN: u32b(256), unix.ETHTOOL_A_RINGS_HDS_THRESH: u32b(300),
	}
	got := attrMap(t, encodeAttrs(t, encodeRings(cfg)))
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("RINGS_SET attributes (-want +got):\n%s", d)
	}
	reply := encodeAttrs(t, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(unix.ETHTOOL_A_RINGS_RX_MAX, 4096)
		ae.Uint32(unix.ETHTOOL_A_RINGS_TX_MAX, 2048)
		ae.Uint32(unix.ETHTOOL_A_RINGS_RX, 512)
		ae.Uint32(unix.ETHTOOL_A_RINGS_TX, 1024)
		ae.Uint8(unix.ETHTOOL_A_RINGS_TCP_DATA_SPLIT, 1)
		ae.Uint8(unix.ETHTOOL_A_RINGS_TX_PUSH, 1)
		ae.Uint32(unix.ETHTOOL_A_RINGS_HDS_THRESH_MAX, 1024)
	})
	r, err := decodeRings(reply)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Rings{RXMax: 4096, TXMax: 2048, RX: 512, TX: 1024, TCPDataSplit: TCPDataSplitDisabled, TXPush: true, HDSThreshMax: 1024}, r); d != "" {
		t.Errorf("decodeRings (-want +got):\n%s", d)
	}
}

func TestRSSEncodeDecode(t *testing.T) {
	hf, x := HashToeplitz, XfrmSymXOR
	cfg := RSSConfig{Context: 3, HFunc: &hf, Indir: []uint32{0, 1, 2, 3, 0, 1, 2, 3}, Key: []byte{1, 2, 3, 4, 5}, InputXfrm: &x}
	m := attrMap(t, encodeAttrs(t, encodeRSSSet(cfg)))
	indir := make([]byte, 0, 32)
	for _, q := range cfg.Indir {
		indir = append(indir, u32b(q)...)
	}
	want := map[uint16][]byte{aRSSContext: u32b(3), aRSSHFunc: u32b(1), aRSSIndir: indir, aRSSHKey: {1, 2, 3, 4, 5}, aRSSInputXfrm: u32b(1)}
	if d := cmp.Diff(want, m); d != "" {
		t.Errorf("RSS_SET attributes (-want +got):\n%s", d)
	}
	// An empty non-nil table is sent (it resets to the default); nil is not.
	if m := attrMap(t, encodeAttrs(t, encodeRSSSet(RSSConfig{Indir: []uint32{}}))); len(m) != 1 || m[aRSSIndir] == nil || len(m[aRSSIndir]) != 0 {
		t.Errorf("reset table: %v", m)
	}
	if m := attrMap(t, encodeAttrs(t, encodeRSSSet(RSSConfig{}))); len(m) != 0 {
		t.Errorf("empty config sent %v", m)
	}
	r, err := decodeRSS(encodeAttrs(t, func(ae *netlink.AttributeEncoder) {
		for k, v := range want {
			ae.Bytes(k, v)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(RSS{Context: 3, HFunc: 1, Indir: cfg.Indir, Key: cfg.Key, InputXfrm: 1}, r); d != "" {
		t.Errorf("decodeRSS (-want +got):\n%s", d)
	}
	if _, err := decodeRSS(encodeAttrs(t, func(ae *netlink.AttributeEncoder) { ae.Bytes(aRSSIndir, []byte{1, 2, 3}) })); err == nil {
		t.Error("3-byte indirection table decoded without error")
	}
}

func TestBitsetForms(t *testing.T) {
	// The same 40-bit set {0, 3, 33} with mask {0, 1, 3, 33}, in compact and
	// verbose form, and as a NOMASK list.
	compact := encodeAttrs(t, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(unix.ETHTOOL_A_BITSET_SIZE, 40)
		ae.Bytes(unix.ETHTOOL_A_BITSET_VALUE, append(u32b(1<<0|1<<3), u32b(1<<1)...))
		ae.Bytes(unix.ETHTOOL_A_BITSET_MASK, append(u32b(1<<0|1<<1|1<<3), u32b(1<<1)...))
	})
	verbose := encodeAttrs(t, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(unix.ETHTOOL_A_BITSET_SIZE, 40)
		ae.Nested(unix.ETHTOOL_A_BITSET_BITS, func(b *netlink.AttributeEncoder) error {
			for _, x := range []struct {
				i  uint32
				n  string
				on bool
			}{{0, "zero", true}, {1, "one", false}, {3, "three", true}, {33, "thirty-three", true}} {
				b.Nested(unix.ETHTOOL_A_BITSET_BITS_BIT, func(e *netlink.AttributeEncoder) error {
					e.Uint32(unix.ETHTOOL_A_BITSET_BIT_INDEX, x.i)
					e.String(unix.ETHTOOL_A_BITSET_BIT_NAME, x.n)
					if x.on {
						e.Flag(unix.ETHTOOL_A_BITSET_BIT_VALUE, true)
					}
					return nil
				})
			}
			return nil
		})
	})
	c, err := decodeBitset(compact)
	if err != nil {
		t.Fatal(err)
	}
	v, err := decodeBitset(verbose)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(c.Value, v.Value); d != "" {
		t.Errorf("value compact vs verbose:\n%s", d)
	}
	if d := cmp.Diff(c.Mask, v.Mask); d != "" {
		t.Errorf("mask compact vs verbose:\n%s", d)
	}
	for i := 0; i < 40; i++ {
		want := i == 0 || i == 3 || i == 33
		if c.Bit(i) != want || v.Bit(i) != want {
			t.Errorf("bit %d: compact %v verbose %v, want %v", i, c.Bit(i), v.Bit(i), want)
		}
	}
	if v.Names[33] != "thirty-three" {
		t.Errorf("verbose names %v", v.Names)
	}
	list := encodeAttrs(t, func(ae *netlink.AttributeEncoder) {
		ae.Flag(unix.ETHTOOL_A_BITSET_NOMASK, true)
		ae.Uint32(unix.ETHTOOL_A_BITSET_SIZE, 40)
		ae.Nested(unix.ETHTOOL_A_BITSET_BITS, func(b *netlink.AttributeEncoder) error {
			for _, i := range []uint32{0, 3, 33} {
				b.Nested(unix.ETHTOOL_A_BITSET_BITS_BIT, func(e *netlink.AttributeEncoder) error {
					e.Uint32(unix.ETHTOOL_A_BITSET_BIT_INDEX, i)
					return nil
				})
			}
			return nil
		})
	})
	l, err := decodeBitset(list)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(c.Value, l.Value); d != "" || l.Mask != nil {
		t.Errorf("NOMASK list: value diff %s, mask %v", d, l.Mask)
	}
	for _, bad := range [][]byte{
		encodeAttrs(t, func(ae *netlink.AttributeEncoder) { ae.Bytes(unix.ETHTOOL_A_BITSET_VALUE, u32b(1)) }),
		encodeAttrs(t, func(ae *netlink.AttributeEncoder) {
			ae.Uint32(unix.ETHTOOL_A_BITSET_SIZE, 40)
			ae.Bytes(unix.ETHTOOL_A_BITSET_VALUE, u32b(1))
			ae.Bytes(unix.ETHTOOL_A_BITSET_MASK, u32b(1))
		}),
		encodeAttrs(t, func(ae *netlink.AttributeEncoder) { ae.Uint32(unix.ETHTOOL_A_BITSET_SIZE, 1<<30) }),
	} {
		if _, err := decodeBitset(bad); err == nil {
			t.Errorf("bad bitset %x decoded without error", bad)
		}
	}
}

func TestExtackErrors(t *testing.T) {
	var answer fakeAnswer
	fk := &fakeKernel{handle: func(cmd uint8, attrs []byte) fakeAnswer { return answer }}
	c := fk.client(t)
	rx := uint32(99)
	// The kernel blames ETHTOOL_A_CHANNELS_RX_COUNT: find its offset in the
	// request the client will send.
	req, err := encodeRequest(request{cmd: unix.ETHTOOL_MSG_CHANNELS_SET, dev: Device{Name: "veth-a"}, encode: encodeChannels(ChannelsConfig{RX: &rx})})
	if err != nil {
		t.Fatal(err)
	}
	answer = fakeAnswer{errno: unix.EINVAL, msg: "requested channel count exceeds maximum", offset: attrOffset(t, req, 0, unix.ETHTOOL_A_CHANNELS_RX_COUNT)}
	err = c.SetChannels(Device{Name: "veth-a"}, ChannelsConfig{RX: &rx})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not *Error", err, err)
	}
	if e.Message != answer.msg || e.Attr != "ETHTOOL_A_CHANNELS_RX_COUNT" || e.Op != "CHANNELS_SET" {
		t.Errorf("Error %+v", e)
	}
	if !errors.Is(err, unix.EINVAL) || errors.Is(err, ErrNotSupported) {
		t.Errorf("errors.Is: EINVAL %v, ErrNotSupported %v", errors.Is(err, unix.EINVAL), errors.Is(err, ErrNotSupported))
	}
	for _, s := range []string{"CHANNELS_SET", "veth-a", answer.msg, "ETHTOOL_A_CHANNELS_RX_COUNT", "EINVAL"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error text %q lacks %q", err, s)
		}
	}

	// An offset inside the header names the nested attribute.
	req, _ = encodeRequest(request{cmd: unix.ETHTOOL_MSG_CHANNELS_GET, dev: Device{Name: "nope0"}})
	answer = fakeAnswer{errno: unix.ENODEV, msg: "no device matches name", offset: attrOffset(t, req, headerAttr, unix.ETHTOOL_A_HEADER_DEV_NAME)}
	_, err = c.Channels(Device{Name: "nope0"})
	if !errors.As(err, &e) || e.Attr != "ETHTOOL_A_CHANNELS_HEADER.ETHTOOL_A_HEADER_DEV_NAME" || !errors.Is(err, unix.ENODEV) {
		t.Errorf("header error: %v (attr %q)", err, e.Attr)
	}

	// EOPNOTSUPP means not supported, errno still reachable.
	answer = fakeAnswer{errno: unix.EOPNOTSUPP}
	_, err = c.RSS(Device{Name: "veth-a"}, 0)
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) || !strings.Contains(err.Error(), "RSS_GET") {
		t.Errorf("EOPNOTSUPP: %v", err)
	}

	// The coalescing validator's EINVAL for a parameter outside the
	// driver's supported set is "not supported", naming the parameter.
	req, _ = encodeRequest(request{cmd: unix.ETHTOOL_MSG_COALESCE_SET, dev: Device{Name: "eth0"}, encode: encodeCoalesce(Coalesce{RXUsecs: u32p(5), RXUsecsIRQ: u32p(9)})})
	answer = fakeAnswer{errno: unix.EINVAL, msg: "cannot modify an unsupported parameter", offset: attrOffset(t, req, 0, unix.ETHTOOL_A_COALESCE_RX_USECS_IRQ)}
	err = c.SetCoalesce(Device{Name: "eth0"}, Coalesce{RXUsecs: u32p(5), RXUsecsIRQ: u32p(9)})
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "ETHTOOL_A_COALESCE_RX_USECS_IRQ") {
		t.Errorf("unsupported coalescing parameter: %v", err)
	}
	// The same text on another message is not reinterpreted.
	answer = fakeAnswer{errno: unix.EINVAL, msg: "cannot modify an unsupported parameter", offset: attrOffset(t, req, 0, unix.ETHTOOL_A_COALESCE_RX_USECS)}
	if err := c.SetRings(Device{Name: "eth0"}, RingsConfig{RX: u32p(1)}); errors.Is(err, ErrNotSupported) {
		t.Errorf("RINGS_SET EINVAL taken as not supported: %v", err)
	}
}

func TestMessageMissingFromKernel(t *testing.T) {
	// A kernel whose family lists no RSS_SET: the client says so without
	// sending anything.
	fk := &fakeKernel{
		ops:    []uint32{unix.ETHTOOL_MSG_CHANNELS_GET, unix.ETHTOOL_MSG_RSS_GET},
		handle: func(uint8, []byte) fakeAnswer { return fakeAnswer{} },
	}
	c := fk.client(t)
	// Without RSS_SET the client falls back to the SRSSH ioctl, which has
	// no hashed-fields part: setting them is refused before any request.
	// (Everything else would go to the device by ioctl, so this test,
	// whose fake kernel has no devices, asks only for that; the lab runs
	// the ioctl on a 6.12 kernel, and TestRSSIoctlOnVeth its refusal.)
	err := c.SetRSS(Device{Name: "xdpio-none0"}, RSSConfig{FlowHash: map[FlowType]HashFields{}})
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "ETHTOOL_MSG_RSS_SET") {
		t.Errorf("SetRSS of flow hash fields on a kernel without RSS_SET: %v", err)
	}
	// A device that does not exist: the ioctl says so.
	err = c.SetRSS(Device{Name: "xdpio-none0"}, RSSConfig{Key: []byte{1, 2, 3, 4}})
	if !errors.Is(err, unix.ENODEV) {
		t.Errorf("SetRSS by ioctl on a missing device: %v, want ENODEV", err)
	}
	if n := len(fk.requests()); n != 0 {
		t.Errorf("%d requests sent, want 0", n)
	}
	if !c.Supports(unix.ETHTOOL_MSG_RSS_GET) || c.Supports(msgRSSSet) {
		t.Error("Supports disagrees with the family's operation list")
	}
}

func TestDeviceValidation(t *testing.T) {
	fk := &fakeKernel{handle: func(uint8, []byte) fakeAnswer { return fakeAnswer{} }}
	c := fk.client(t)
	for _, d := range []Device{{}, {Index: -1}, {Name: "a-name-longer-than-15"}} {
		if _, err := c.Channels(d); err == nil {
			t.Errorf("Channels(%+v) succeeded", d)
		}
	}
	if len(fk.requests()) != 0 {
		t.Error("invalid devices reached the kernel")
	}
}

func TestConcurrentRequests(t *testing.T) {
	// Each answer must reach the goroutine that asked: the reply carries
	// the requested device's index in its channel counts.
	fk := &fakeKernel{handle: func(cmd uint8, attrs []byte) fakeAnswer {
		idx := binary.NativeEndian.Uint32(headerOfRaw(attrs)[unix.ETHTOOL_A_HEADER_DEV_INDEX])
		ae := netlink.NewAttributeEncoder()
		ae.Uint32(unix.ETHTOOL_A_CHANNELS_RX_MAX, idx)
		ae.Uint32(unix.ETHTOOL_A_CHANNELS_RX_COUNT, idx)
		b, _ := ae.Encode()
		return fakeAnswer{replies: []genetlink.Message{{Header: genetlink.Header{Command: msgChannelsGetReply, Version: 1}, Data: b}}}
	}}
	c := fk.client(t)
	var wg sync.WaitGroup
	for g := 1; g <= 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				ch, err := c.Channels(Device{Index: g})
				if err != nil || ch.RX != uint32(g) {
					t.Errorf("goroutine %d got %+v, %v", g, ch, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func headerOfRaw(attrs []byte) map[uint16][]byte {
	out := map[uint16][]byte{}
	ad, _ := netlink.NewAttributeDecoder(attrs)
	for ad.Next() {
		if ad.Type() == headerAttr {
			nad, _ := netlink.NewAttributeDecoder(ad.Bytes())
			for nad.Next() {
				out[nad.Type()] = nad.Bytes()
			}
		}
	}
	return out
}

func TestFeaturesSetEncodingAndReply(t *testing.T) {
	names := []string{"tx-scatter-gather", "tx-checksum-ipv4", "", "rx-gro", "rx-checksum"}
	strset := func(t *testing.T) []byte {
		return encodeAttrs(t, func(ae *netlink.AttributeEncoder) {
			ae.Nested(unix.ETHTOOL_A_STRSET_STRINGSETS, func(s *netlink.AttributeEncoder) error {
				s.Nested(unix.ETHTOOL_A_STRINGSETS_STRINGSET, func(n *netlink.AttributeEncoder) error {
					n.Uint32(unix.ETHTOOL_A_STRINGSET_ID, ssFeatures)
					n.Uint32(unix.ETHTOOL_A_STRINGSET_COUNT, uint32(len(names)))
					n.Nested(unix.ETHTOOL_A_STRINGSET_STRINGS, func(ss *netlink.AttributeEncoder) error {
						for i, nm := range names {
							ss.Nested(unix.ETHTOOL_A_STRINGS_STRING, func(e *netlink.AttributeEncoder) error {
								e.Uint32(unix.ETHTOOL_A_STRING_INDEX, uint32(i))
								e.String(unix.ETHTOOL_A_STRING_VALUE, nm)
								return nil
							})
						}
						return nil
					})
					return nil
				})
				return nil
			})
		})
	}
	compact := func(ae *netlink.AttributeEncoder, typ uint16, value, mask uint32, nomask bool) {
		ae.Nested(typ, func(b *netlink.AttributeEncoder) error {
			if nomask {
				b.Flag(unix.ETHTOOL_A_BITSET_NOMASK, true)
			}
			b.Uint32(unix.ETHTOOL_A_BITSET_SIZE, uint32(len(names)))
			b.Bytes(unix.ETHTOOL_A_BITSET_VALUE, u32b(value))
			if !nomask {
				b.Bytes(unix.ETHTOOL_A_BITSET_MASK, u32b(mask))
			}
			return nil
		})
	}
	var setAttrs []byte
	fk := &fakeKernel{handle: func(cmd uint8, attrs []byte) fakeAnswer {
		switch cmd {
		case unix.ETHTOOL_MSG_STRSET_GET:
			return fakeAnswer{replies: []genetlink.Message{{Header: genetlink.Header{Command: msgStrsetGetReply, Version: 1}, Data: strset(t)}}}
		case unix.ETHTOOL_MSG_FEATURES_GET:
			b := encodeAttrs(t, func(ae *netlink.AttributeEncoder) {
				compact(ae, unix.ETHTOOL_A_FEATURES_HW, 0b11001, 0, true)
				compact(ae, unix.ETHTOOL_A_FEATURES_WANTED, 0b01001, 0, true)
				compact(ae, unix.ETHTOOL_A_FEATURES_ACTIVE, 0b01011, 0, true)
				compact(ae, unix.ETHTOOL_A_FEATURES_NOCHANGE, 0b00010, 0, true)
			})
			return fakeAnswer{replies: []genetlink.Message{{Header: genetlink.Header{Command: msgFeaturesGetReply, Version: 1}, Data: b}}}
		case unix.ETHTOOL_MSG_FEATURES_SET:
			setAttrs = attrs
			// rx-checksum (bit 4) was wanted on but stays off; rx-gro
			// (bit 3) changed to off.
			b := encodeAttrs(t, func(ae *netlink.AttributeEncoder) {
				compact(ae, unix.ETHTOOL_A_FEATURES_WANTED, 1<<4, 1<<4, false)
				compact(ae, unix.ETHTOOL_A_FEATURES_ACTIVE, 0, 1<<3, false)
			})
			return fakeAnswer{replies: []genetlink.Message{{Header: genetlink.Header{Command: msgFeaturesSetReply, Version: 1}, Data: b}}}
		}
		return fakeAnswer{}
	}}
	c := fk.client(t)
	fs, err := c.Features(Device{Name: "veth-a"})
	if err != nil {
		t.Fatal(err)
	}
	want := Features{
		{Name: "tx-scatter-gather", Active: true, Wanted: true, Changeable: true},
		{Name: "tx-checksum-ipv4", Active: true, NoChange: true},
		{Name: ""},
		{Name: "rx-gro", Active: true, Wanted: true, Changeable: true},
		{Name: "rx-checksum", Changeable: true},
	}
	if d := cmp.Diff(want, fs); d != "" {
		t.Errorf("Features (-want +got):\n%s", d)
	}
	res, err := c.SetFeatures(Device{Name: "veth-a"}, map[string]bool{"rx-gro": false, "rx-checksum": true})
	if err != nil {
		t.Fatal(err)
	}
	wantRes := FeaturesResult{
		Refused: []FeatureChange{{Name: "rx-checksum", Wanted: true, Active: false}},
		Changed: []FeatureChange{{Name: "rx-gro", Wanted: false, Active: false}},
	}
	if d := cmp.Diff(wantRes, res); d != "" {
		t.Errorf("SetFeatures result (-want +got):\n%s", d)
	}
	// The request names the features, VALUE flag only on the one to turn
	// on, and asks for compact bitsets in the reply.
	wanted, err := decodeBitset(attrMap(t, setAttrs)[unix.ETHTOOL_A_FEATURES_WANTED])
	if err == nil {
		t.Errorf("request bitset has no size, yet decoded: %+v", wanted)
	}
	tree := attrTreeStrings(t, setAttrs)
	for _, s := range []string{
		"1/3=01000000", // header flags: compact bitsets
		"3/3/1/2=72782d67726f00", "3/3/1/2=72782d636865636b73756d00", "3/3/1/3=",
	} {
		if !containsString(tree, s) {
			t.Errorf("request tree lacks %s:\n%s", s, strings.Join(tree, "\n"))
		}
	}
	if _, err := c.SetFeatures(Device{Name: "veth-a"}, map[string]bool{"no-such-feature": true}); err == nil || !strings.Contains(err.Error(), "no-such-feature") {
		t.Errorf("unknown feature: %v", err)
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestRSSContexts(t *testing.T) {
	var sent []genetlink.Message
	fk := &fakeKernel{handle: func(cmd uint8, attrs []byte) fakeAnswer {
		sent = append(sent, genetlink.Message{Header: genetlink.Header{Command: cmd}, Data: attrs})
		if cmd == msgRSSCreateAct {
			b := encodeAttrs(t, func(ae *netlink.AttributeEncoder) {
				ae.Nested(headerAttr, func(n *netlink.AttributeEncoder) error { n.String(unix.ETHTOOL_A_HEADER_DEV_NAME, "eth9"); return nil })
				ae.Uint32(aRSSContext, 5)
			})
			return fakeAnswer{replies: []genetlink.Message{{Header: genetlink.Header{Command: msgRSSCreateActReply, Version: 1}, Data: b}}}
		}
		return fakeAnswer{}
	}}
	c := fk.client(t)
	hf := HashXOR
	ctx, err := c.CreateRSSContext(Device{Name: "eth9"}, RSSConfig{HFunc: &hf, Indir: []uint32{2, 3}})
	if err != nil || ctx != 5 {
		t.Fatalf("CreateRSSContext = %d, %v", ctx, err)
	}
	if err := c.DeleteRSSContext(Device{Name: "eth9"}, 0); err == nil {
		t.Error("deleting context 0 accepted")
	}
	if err := c.DeleteRSSContext(Device{Name: "eth9"}, 5); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 {
		t.Fatalf("%d requests, want 2 (context 0 must not be sent)", len(sent))
	}
	m := attrMap(t, sent[0].Data)
	delete(m, headerAttr)
	if d := cmp.Diff(map[uint16][]byte{aRSSHFunc: u32b(HashXOR), aRSSIndir: append(u32b(2), u32b(3)...)}, m); d != "" || sent[0].Header.Command != msgRSSCreateAct {
		t.Errorf("create request (-want +got):\n%s", d)
	}
	m = attrMap(t, sent[1].Data)
	delete(m, headerAttr)
	if d := cmp.Diff(map[uint16][]byte{aRSSContext: u32b(5)}, m); d != "" || sent[1].Header.Command != msgRSSDeleteAct {
		t.Errorf("delete request (-want +got):\n%s", d)
	}
}

func TestDecodeNotification(t *testing.T) {
	hdr := func(ae *netlink.AttributeEncoder) {
		ae.Nested(headerAttr, func(n *netlink.AttributeEncoder) error {
			n.Uint32(unix.ETHTOOL_A_HEADER_DEV_INDEX, 3)
			n.String(unix.ETHTOOL_A_HEADER_DEV_NAME, "eth3")
			return nil
		})
	}
	for _, tc := range []struct {
		cmd   uint8
		attrs func(ae *netlink.AttributeEncoder)
		check func(n Notification) bool
	}{
		{msgChannelsNtf, func(ae *netlink.AttributeEncoder) { ae.Uint32(unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT, 6) },
			func(n Notification) bool { return n.Kind == "channels" && n.Channels.Combined == 6 }},
		{msgRingsNtf, func(ae *netlink.AttributeEncoder) { ae.Uint32(unix.ETHTOOL_A_RINGS_RX, 1024) },
			func(n Notification) bool { return n.Kind == "rings" && n.Rings.RX == 1024 }},
		{msgCoalesceNtf, func(ae *netlink.AttributeEncoder) { ae.Uint32(unix.ETHTOOL_A_COALESCE_RX_USECS, 50) },
			func(n Notification) bool {
				return n.Kind == "coalesce" && *n.Coalesce.RXUsecs == 50 && n.Coalesce.TXUsecs == nil
			}},
		{msgRSSNtf, func(ae *netlink.AttributeEncoder) { ae.Uint32(aRSSHFunc, HashCRC32) },
			func(n Notification) bool { return n.Kind == "rss" && n.RSS.HFunc == HashCRC32 }},
		{msgFeaturesNtf, func(ae *netlink.AttributeEncoder) {
			for typ := uint16(unix.ETHTOOL_A_FEATURES_HW); typ <= unix.ETHTOOL_A_FEATURES_NOCHANGE; typ++ {
				ae.Nested(typ, func(b *netlink.AttributeEncoder) error {
					b.Flag(unix.ETHTOOL_A_BITSET_NOMASK, true)
					b.Uint32(unix.ETHTOOL_A_BITSET_SIZE, 2)
					b.Nested(unix.ETHTOOL_A_BITSET_BITS, func(bits *netlink.AttributeEncoder) error {
						bits.Nested(unix.ETHTOOL_A_BITSET_BITS_BIT, func(e *netlink.AttributeEncoder) error {
							e.Uint32(unix.ETHTOOL_A_BITSET_BIT_INDEX, 1)
							e.String(unix.ETHTOOL_A_BITSET_BIT_NAME, "rx-gro")
							return nil
						})
						return nil
					})
					return nil
				})
			}
		}, func(n Notification) bool {
			return n.Kind == "features" && len(n.Features) == 2 && n.Features[1].Name == "rx-gro" && n.Features[1].Active
		}},
		{msgPSENtf, func(ae *netlink.AttributeEncoder) {}, func(n Notification) bool { return n.Kind == "other" }},
	} {
		b := encodeAttrs(t, func(ae *netlink.AttributeEncoder) { hdr(ae); tc.attrs(ae) })
		n, err := decodeNotification(genetlink.Message{Header: genetlink.Header{Command: tc.cmd}, Data: b}, nil)
		if err != nil {
			t.Fatalf("notification %d: %v", tc.cmd, err)
		}
		if !tc.check(n) || n.Device != (Device{Index: 3, Name: "eth3"}) || n.Cmd != tc.cmd {
			t.Errorf("notification %d decoded as %+v", tc.cmd, n)
		}
	}
	if _, err := decodeNotification(genetlink.Message{Header: genetlink.Header{Command: msgCoalesceNtf}, Data: []byte{8, 0, 2, 0, 1}}, nil); err == nil {
		t.Error("truncated coalesce notification decoded")
	}
}

func TestRSSContextsDumpFake(t *testing.T) {
	reply := func(dev string, ctx uint32) genetlink.Message {
		b := encodeAttrs(t, func(ae *netlink.AttributeEncoder) {
			ae.Nested(headerAttr, func(n *netlink.AttributeEncoder) error { n.String(unix.ETHTOOL_A_HEADER_DEV_NAME, dev); return nil })
			if ctx != 0 {
				ae.Uint32(aRSSContext, ctx)
			}
			ae.Uint32(aRSSHFunc, HashToeplitz)
		})
		return genetlink.Message{Header: genetlink.Header{Command: msgRSSGetReply, Version: 1}, Data: b}
	}
	var answer fakeAnswer
	fk := &fakeKernel{handle: func(cmd uint8, attrs []byte) fakeAnswer { return answer }}
	c := fk.client(t)
	answer = fakeAnswer{replies: []genetlink.Message{reply("eth9", 0), reply("eth9", 2), reply("other0", 0)}}
	rs, err := c.RSSContexts(Device{Name: "eth9"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Context != 0 || rs[1].Context != 2 {
		t.Errorf("contexts %+v, want 0 and 2 of eth9 only", rs)
	}
	answer = fakeAnswer{}
	if _, err := c.RSSContexts(Device{Name: "eth9"}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("empty dump: %v", err)
	}
	answer = fakeAnswer{errno: unix.ENODEV}
	if _, err := c.RSSContexts(Device{Name: "eth9"}); !errors.Is(err, unix.ENODEV) {
		t.Errorf("dump error: %v", err)
	}
	// The client is still in step after the dumps.
	answer = fakeAnswer{replies: []genetlink.Message{reply("eth9", 0)}}
	if _, err := c.RSS(Device{Name: "eth9"}, 0); err != nil {
		t.Errorf("RSS after dumps: %v", err)
	}
	if reqs := fk.requests(); len(reqs) != 5 { // three dumps, RSS_GET and its STRSET_GET
		t.Errorf("%d requests", len(reqs))
	}
}

func TestFlowHash(t *testing.T) {
	cfg := RSSConfig{FlowHash: map[FlowType]HashFields{FlowTCP4: HashIPSrcDst | HashL4Src | HashL4Dst, FlowUDP6: HashIPSrcDst}}
	b := encodeAttrs(t, encodeRSSSet(cfg))
	m := attrMap(t, b)
	nest := attrMap(t, m[aRSSFlowHash])
	want := map[uint16][]byte{4: u32b(0xf0), 7: u32b(0x30)} // ETHTOOL_A_FLOW_TCP4, _UDP6; RXH_IP_SRC|DST = 0x30, L4 bytes 0x40|0x80
	if d := cmp.Diff(want, nest); d != "" {
		t.Errorf("FLOW_HASH nest (-want +got):\n%s", d)
	}
	if c := canonFirst(t, b); !strings.HasPrefix(c, "8{") {
		t.Errorf("FLOW_HASH not sent as a nest: %s", c)
	}
	r, err := decodeRSS(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(cfg.FlowHash, r.FlowHash); d != "" {
		t.Errorf("round trip (-sent +decoded):\n%s", d)
	}
	for h, s := range map[HashFields]string{0: "none", HashIPSrcDst: "ip-src,ip-dst", HashL4Dst | HashDiscard: "l4-dst,discard", 1: "bit-0"} {
		if got := h.String(); got != s {
			t.Errorf("HashFields(%#x) = %q, want %q", uint32(h), got, s)
		}
		if back, ok := ParseHashFields(s); h != 1 && (!ok || back != h) {
			t.Errorf("ParseHashFields(%q) = %#x, %v", s, uint32(back), ok)
		}
	}
	for f := FlowEther; f <= FlowGTPUDL6; f++ {
		if back, ok := ParseFlowType(f.String()); !ok || back != f {
			t.Errorf("flow type %d %q does not parse back", f, f)
		}
	}
}

// canonFirst returns the canonical form of the first attribute of b.
func canonFirst(t *testing.T, b []byte) string {
	t.Helper()
	c, err := canonAttrs(b)
	if err != nil || len(c) == 0 {
		t.Fatalf("canonAttrs: %v", err)
	}
	return c[0]
}
