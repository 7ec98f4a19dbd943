//go:build linux

package netdev

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"github.com/xdpio/xdpio/internal/genl/genlfuzz"
	"github.com/xdpio/xdpio/internal/netnstest"
	"golang.org/x/sys/unix"
)

// The decoders take bytes from the kernel. Fuzzing checks that truncated
// and garbage attributes give errors, never panics, and that no decoder
// accepts a stream whose attribute framing is broken. Seeds: replies the
// real kernel sent for a test veth with GRO on and for the host's devices
// (testdata/fuzz, written by TestWriteFuzzSeeds with XDPIO_WRITE_SEEDS=1),
// hand-built replies and their truncations.

var (
	addSeeds    = genlfuzz.AddSeeds
	checkDecode = genlfuzz.CheckDecode
	attrs       = genlfuzz.Attrs
)

func napiSeed() []byte {
	d, g := uint32(2), 200*time.Microsecond
	return attrs(func(ae *netlink.AttributeEncoder) {
		ae.Uint32(AttrNAPIIfindex, 3)
		ae.Uint32(AttrNAPIID, 8193)
		ae.Uint32(AttrNAPIIRQ, 42)
		EncodeNAPIConfig(ae, NAPIConfig{DeferHardIRQs: &d, GROFlushTimeout: &g})
		ae.Uint32(99, 1)
	})
}

func FuzzDecodeNAPI(f *testing.F) {
	addSeeds(f, napiSeed())
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := DecodeNAPI(b)
		checkDecode(t, b, err)
		if err == nil && (n.ID == 0 && n.Ifindex == 0) {
			t.Fatalf("accepted a reply without id and ifindex: %x", b)
		}
	})
}

func FuzzDecodeQueue(f *testing.F) {
	addSeeds(f, attrs(func(ae *netlink.AttributeEncoder) {
		ae.Uint32(AttrQueueID, 1)
		ae.Uint32(AttrQueueIfindex, 3)
		ae.Uint32(AttrQueueType, uint32(QueueRX))
		ae.Uint32(AttrQueueNAPIID, 8193)
		ae.Nested(AttrQueueXSK, func(*netlink.AttributeEncoder) error { return nil })
	}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := DecodeQueue(b)
		checkDecode(t, b, err)
	})
}

func FuzzDecodeDev(f *testing.F) {
	addSeeds(f, attrs(func(ae *netlink.AttributeEncoder) {
		ae.Uint32(AttrDevIfindex, 3)
		ae.Uint64(AttrDevXDPFeatures, XDPActBasic|XDPActRedirect)
		ae.Uint32(AttrDevXDPZCMaxSegs, 1)
		ae.Uint64(AttrDevXDPRxMetadataFeatures, XDPRxMetadataHash)
		ae.Uint64(AttrDevXSKFeatures, 0)
	}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := DecodeDev(b)
		checkDecode(t, b, err)
	})
}

func FuzzDecodeQStats(f *testing.F) {
	addSeeds(f, attrs(func(ae *netlink.AttributeEncoder) {
		ae.Uint32(AttrQStatsIfindex, 3)
		ae.Uint32(AttrQStatsQueueType, uint32(QueueTX))
		ae.Uint32(AttrQStatsQueueID, 0)
		ae.Uint32(uint16(TXPackets), 10)
		ae.Uint64(uint16(TXBytes), 1<<40)
		ae.Uint64(77, 5)
	}))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeQStats(b)
		checkDecode(t, b, err)
		if err == nil {
			for _, c := range s.Reported() {
				if !s.Has(c) {
					t.Fatalf("Reported lists %s but Has says no", c)
				}
			}
		}
	})
}

func FuzzDecodePolicyDump(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := decodePolicyDump([][]byte{b})
		checkDecode(t, b, err)
	})
}

// TestWriteFuzzSeeds records replies of the running kernel as seeds. It
// runs only with XDPIO_WRITE_SEEDS=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("XDPIO_WRITE_SEEDS") != "1" {
		t.Skip("skipping: set XDPIO_WRITE_SEEDS=1 to record kernel replies as fuzz seeds")
	}
	netnstest.RequirePriv(t)
	write := func(fuzz, name string, b []byte) { genlfuzz.WriteSeed(t, ".", fuzz, name, b) }
	p, c := napiPair(t, 2)
	dump := func(cmd uint8, enc func(ae *netlink.AttributeEncoder)) [][]byte {
		rs, err := c.do(request{cmd: cmd, dump: true, encode: enc})
		if err != nil {
			t.Fatalf("%s: %v", OpName(cmd), err)
		}
		return rs
	}
	for i, b := range dump(CmdNAPIGet, func(ae *netlink.AttributeEncoder) { ae.Uint32(AttrNAPIIfindex, uint32(p.A.Ifindex)) }) {
		write("FuzzDecodeNAPI", fmt.Sprintf("kernel-veth-napi%d", i), b)
	}
	for i, b := range dump(CmdQueueGet, func(ae *netlink.AttributeEncoder) { ae.Uint32(AttrQueueIfindex, uint32(p.A.Ifindex)) }) {
		write("FuzzDecodeQueue", fmt.Sprintf("kernel-veth-queue%d", i), b)
	}
	for i, b := range dump(CmdDevGet, nil) {
		write("FuzzDecodeDev", fmt.Sprintf("kernel-dev%d", i), b)
	}
	// Host devices (read-only): qstats where a driver keeps them.
	hc, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	devs, _ := hc.Devs()
	for _, d := range devs {
		rs, err := hc.do(request{cmd: CmdQStatsGet, dump: true, encode: func(ae *netlink.AttributeEncoder) {
			ae.Uint32(AttrQStatsIfindex, uint32(d.Ifindex))
			ae.Uint32(AttrQStatsScope, QStatsScopeQueue)
		}})
		if err != nil {
			continue
		}
		for i, b := range rs {
			write("FuzzDecodeQStats", fmt.Sprintf("kernel-host-qstats%d", i), b)
		}
	}
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.CTRL_ATTR_FAMILY_NAME, FamilyName)
	req, _ := ae.Encode()
	msgs, err := hc.Execute(genlMsg(unix.CTRL_CMD_GETFAMILY, req), unix.GENL_ID_CTRL, netlink.Request)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("family: %v", err)
	}
	// internal/genl's FuzzDecodeFamily decodes the controller's replies.
	genlfuzz.WriteSeed(t, "../genl", "FuzzDecodeFamily", "kernel-netdev-family", msgs[0].Data)
	ae = netlink.NewAttributeEncoder()
	ae.Uint16(unix.CTRL_ATTR_FAMILY_ID, hc.Family().ID)
	ae.Uint32(unix.CTRL_ATTR_OP, CmdNAPISet)
	req, _ = ae.Encode()
	msgs, err = hc.Execute(genlMsg(unix.CTRL_CMD_GETPOLICY, req), unix.GENL_ID_CTRL, netlink.Request|netlink.Dump)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	for i, m := range msgs {
		write("FuzzDecodePolicyDump", fmt.Sprintf("kernel-napi-set-policy%d", i), m.Data)
	}
}

func genlMsg(cmd uint8, data []byte) genetlink.Message {
	return genetlink.Message{Header: genetlink.Header{Command: cmd, Version: 1}, Data: data}
}
