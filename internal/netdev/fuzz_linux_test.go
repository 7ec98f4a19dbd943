//go:build linux

package netdev

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"github.com/xdpio/xdpio/internal/genl"
	"github.com/xdpio/xdpio/internal/netnstest"
	"golang.org/x/sys/unix"
)

// The decoders take bytes from the kernel. Fuzzing checks that truncated
// and garbage attributes give errors, never panics, and that no decoder
// accepts a stream whose attribute framing is broken. Seeds: replies the
// real kernel sent for a test veth with GRO on and for the host's devices
// (testdata/fuzz, written by TestWriteFuzzSeeds with XDPIO_WRITE_SEEDS=1),
// hand-built replies and their truncations.

func framingValid(b []byte) bool {
	pos := 0
	for pos < len(b) {
		if pos+4 > len(b) {
			return false
		}
		l := int(binary.NativeEndian.Uint16(b[pos:]))
		if l < 4 || pos+l > len(b) {
			return false
		}
		pos += (l + 3) &^ 3
	}
	return true
}

func addSeeds(f *testing.F, seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(s)
		for _, cut := range []int{1, 3, 4, 5, len(s) / 2, len(s) - 1} {
			if cut > 0 && cut < len(s) {
				f.Add(s[:cut])
			}
		}
	}
}

func attrs(fn func(ae *netlink.AttributeEncoder)) []byte {
	ae := netlink.NewAttributeEncoder()
	fn(ae)
	b, err := ae.Encode()
	if err != nil {
		panic(err)
	}
	return b
}

func checkDecode(t *testing.T, b []byte, err error) {
	t.Helper()
	if err == nil && !framingValid(b) {
		t.Fatalf("decoder accepted broken framing: %x", b)
	}
}

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

func FuzzDecodeFamily(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, err := genl.DecodeFamily(b)
		checkDecode(t, b, err)
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
	write := func(fuzz, name string, b []byte) {
		dir := filepath.Join("testdata", "fuzz", fuzz)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
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
	msgs, err := hc.c.Execute(genlMsg(unix.CTRL_CMD_GETFAMILY, req), unix.GENL_ID_CTRL, netlink.Request)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("family: %v", err)
	}
	write("FuzzDecodeFamily", "kernel-netdev-family", msgs[0].Data)
	ae = netlink.NewAttributeEncoder()
	ae.Uint16(unix.CTRL_ATTR_FAMILY_ID, hc.family.ID)
	ae.Uint32(unix.CTRL_ATTR_OP, CmdNAPISet)
	req, _ = ae.Encode()
	msgs, err = hc.c.Execute(genlMsg(unix.CTRL_CMD_GETPOLICY, req), unix.GENL_ID_CTRL, netlink.Request|netlink.Dump)
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
