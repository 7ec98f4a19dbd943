//go:build linux

package nic

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
	"github.com/xdpio/xdpio/internal/netnstest"
	"golang.org/x/sys/unix"
)

func hostRun(t *testing.T, h *netnstest.Host, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	if err != nil && name != "strace" {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// ethtoolLValue returns the current count ethtool -l prints for kind.
func ethtoolLValue(t *testing.T, out, kind string) string {
	t.Helper()
	_, cur, ok := strings.Cut(out, "Current hardware settings:")
	if !ok {
		t.Fatalf("ethtool -l output:\n%s", out)
	}
	m := regexp.MustCompile(`(?m)^` + kind + `:\s+(\S+)`).FindStringSubmatch(cur)
	if m == nil {
		t.Fatalf("no %s in ethtool -l:\n%s", kind, out)
	}
	return m[1]
}

func TestDeviceChannelsOnVeth(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	pair := netnstest.New(t, netnstest.Config{Queues: 4})
	d := openDev(t, pair.A, pair.A.Link)
	var before, after ChannelCounts
	var errRings, errTable, errSet error
	err := pair.A.Do(func() (err error) {
		if before, err = d.Channels(); err != nil {
			return err
		}
		one, three := uint32(1), uint32(3)
		if err = d.SetChannels(ChannelsConfig{RX: &one, TX: &three}); err != nil {
			return err
		}
		after, err = d.Channels()
		_, errRings = d.Rings()
		_, errTable = d.RSS()
		errSet = d.SetRSS(RSSConfig{Key: make([]byte, 40)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if before.RX != 4 || before.TX != 4 || before.RXMax != 4 {
		t.Errorf("before: %+v", before)
	}
	out := hostRun(t, pair.A, "ethtool", "-l", pair.A.Link)
	if got := []string{ethtoolLValue(t, out, "RX"), ethtoolLValue(t, out, "TX")}; !cmp.Equal(got, []string{"1", "3"}) || after.RX != 1 || after.TX != 3 {
		t.Errorf("after set rx 1 tx 3: ethtool -l says %v, Channels says %+v", got, after)
	}
	for name, err := range map[string]error{"Rings": errRings, "Table": errTable, "SetTable": errSet} {
		var de *RequestError
		if !errors.Is(err, ErrNotSupported) || !errors.As(err, &de) {
			t.Errorf("%s on veth: %v, want ErrNotSupported", name, err)
		}
	}
}

var ethtoolKLine = regexp.MustCompile(`(?m)^\t?([a-z0-9-]+): (on|off)`)

func ethtoolK(t *testing.T, h *netnstest.Host, dev string) map[string]bool {
	m := map[string]bool{}
	for _, s := range ethtoolKLine.FindAllStringSubmatch(hostRun(t, h, "ethtool", "-k", dev), -1) {
		m[s[1]] = s[2] == "on"
	}
	return m
}

func TestDeviceFeaturesOnVeth(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	d := openDev(t, pair.A, pair.A.Link)
	for _, on := range []bool{false, true} {
		var res FeaturesResult
		var fs []Feature
		err := pair.A.Do(func() (err error) {
			res, err = d.SetFeatures(map[string]bool{"tso": on, "gro": on, "rx-checksumming": on})
			if err != nil {
				return err
			}
			fs, err = d.Features()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Refused) != 0 {
			t.Errorf("refused: %+v", res.Refused)
		}
		k := ethtoolK(t, pair.A, pair.A.Link)
		for _, n := range []string{"tcp-segmentation-offload", "generic-receive-offload", "rx-checksumming", "tx-tcp6-segmentation"} {
			if k[n] != on {
				t.Errorf("set %v: ethtool -k shows %s: %v", on, n, k[n])
			}
		}
		// Offload groups as ethtool -k shows them.
		for _, o := range OffloadStates(fs) {
			if v, ok := k[o.Name]; ok && v != o.Active {
				t.Errorf("group %s: ethtool -k %v, OffloadStates %v", o.Name, v, o.Active)
			}
		}
	}
	var res FeaturesResult
	err := pair.A.Do(func() (err error) {
		res, err = d.SetFeatures(map[string]bool{"ntuple": true, "rx-hashing": true})
		return
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Refused) != 2 {
		t.Errorf("veth's fixed ntuple/rx-hashing: refused %+v", res.Refused)
	}
}

// TestOffloadGroupsMatchEthtool runs ethtool -K with group names under
// strace and requires ExpandFeatures to map them to the same kernel
// features with the same values.
func TestOffloadGroupsMatchEthtool(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	netnstest.RequireTool(t, "strace")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	d := openDev(t, pair.A, pair.A.Link)
	var known []string
	if err := pair.A.Do(func() error {
		fs, err := d.Features()
		for _, f := range fs {
			known = append(known, f.Name)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"tso", "off", "gro", "on", "rx", "off"},
		{"tx", "on", "sg", "off", "gso", "on"},
		{"rxhash", "off", "ntuple", "off", "lro", "off", "rxvlan", "on", "txvlan", "off"},
	} {
		out := hostRun(t, pair.A, "strace", append([]string{"-f", "-e", "trace=sendto,sendmsg", "-xx", "-s", "65536", "ethtool", "-K", pair.A.Link}, args...)...)
		theirs := featuresSetRequest(t, out)
		want := map[string]bool{}
		for i := 0; i < len(args); i += 2 {
			want[args[i]] = args[i+1] == "on"
		}
		ours, err := ExpandFeatures(want, known)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(theirs, ours); d != "" {
			t.Errorf("ethtool -K %v (-ethtool +ExpandFeatures):\n%s", args, d)
		}
	}
}

var straceEthtool = regexp.MustCompile(`nlmsg_type=ethtool, [^}]*\}, "((?:\\x[0-9a-f]{2})*)"`)

// featuresSetRequest decodes the FEATURES_SET request ethtool sent:
// feature name → value of its verbose WANTED bitset.
func featuresSetRequest(t *testing.T, out string) map[string]bool {
	t.Helper()
	for _, m := range straceEthtool.FindAllStringSubmatch(out, -1) {
		raw, err := hex.DecodeString(strings.ReplaceAll(m[1], `\x`, ""))
		if err != nil || len(raw) < 4 || raw[0] != unix.ETHTOOL_MSG_FEATURES_SET {
			continue
		}
		got := map[string]bool{}
		ad, err := netlink.NewAttributeDecoder(raw[4:])
		if err != nil {
			t.Fatal(err)
		}
		for ad.Next() {
			if ad.Type() != unix.ETHTOOL_A_FEATURES_WANTED {
				continue
			}
			ad.Nested(func(b *netlink.AttributeDecoder) error {
				for b.Next() {
					if b.Type() != unix.ETHTOOL_A_BITSET_BITS {
						continue
					}
					b.Nested(func(bits *netlink.AttributeDecoder) error {
						for bits.Next() {
							name, on := "", false
							bits.Nested(func(bit *netlink.AttributeDecoder) error {
								for bit.Next() {
									switch bit.Type() {
									case unix.ETHTOOL_A_BITSET_BIT_NAME:
										name = bit.String()
									case unix.ETHTOOL_A_BITSET_BIT_INDEX:
										name = "#" + strconv.Itoa(int(bit.Uint32()))
									case unix.ETHTOOL_A_BITSET_BIT_VALUE:
										on = true
									}
								}
								return nil
							})
							got[name] = on
						}
						return nil
					})
				}
				return nil
			})
		}
		if err := ad.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	t.Fatalf("no FEATURES_SET in strace output:\n%s", out)
	return nil
}

// TestDeviceEth0ReadOnly reads eth0 (never sets it) and compares with
// ethtool.
func TestDeviceEth0ReadOnly(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	if exec.Command("ip", "link", "show", "eth0").Run() != nil {
		netnstest.SkipIfMachineLacks(t, "eth0", "does not exist")
	}
	d := openDev(t, nil, "eth0")
	tab, err := d.RSS()
	out, _ := exec.Command("ethtool", "-x", "eth0").CombinedOutput()
	switch {
	case errors.Is(err, ErrNotSupported):
		t.Logf("eth0 has no RSS: %v", err)
	case err != nil:
		t.Fatal(err)
	default:
		if tab.HFunc != "" && !strings.Contains(string(out), "    "+tab.HFunc+": on") {
			t.Errorf("eth0 hfunc %q, ethtool -x:\n%s", tab.HFunc, out)
		}
		for _, n := range tab.HFuncs {
			if n != "" && !strings.Contains(string(out), "    "+n+": ") {
				t.Errorf("hash function %q not listed by ethtool -x", n)
			}
		}
		t.Logf("eth0 RSS table: %d entries, key %d bytes, hfunc %q, xfrm %v", len(tab.Indir), len(tab.Key), tab.HFunc, tab.InputXfrm)
	}
	r, err := d.Rings()
	if err == nil {
		gout, _ := exec.Command("ethtool", "-g", "eth0").CombinedOutput()
		if !strings.Contains(string(gout), "RX:\t\t"+strconv.Itoa(int(r.RX))) {
			t.Errorf("eth0 rings %+v vs ethtool -g:\n%s", r, gout)
		}
	}
}

// openDev opens device name inside h's namespace (the test's own when h
// is nil) and closes it when the test ends.
func openDev(t *testing.T, h *netnstest.Host, name string) *Device {
	t.Helper()
	var d *Device
	open := func() (err error) { d, err = Open(name); return err }
	var err error
	if h == nil {
		err = open()
	} else {
		err = h.Do(open)
	}
	if err != nil {
		t.Fatalf("Open %s: %v", name, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestDeviceConcurrentAndClosed: one Device serves ethtool and netdev
// requests from many goroutines at once (run with -race), each answer is
// its own request's; after Close every method fails with ErrClosed, and
// Close may be called again.
func TestDeviceConcurrentAndClosed(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 3})
	d := openDev(t, pair.A, pair.A.Link)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				ch, err := d.Channels()
				if err != nil || ch.RX != 3 || ch.TX != 3 {
					errs <- fmt.Errorf("Channels: %+v, %v", ch, err)
					return
				}
				n, err := d.RXQueues()
				if err != nil || n != 3 {
					errs <- fmt.Errorf("RXQueues: %d, %v", n, err)
					return
				}
				qs, err := d.Queues()
				if err != nil || len(qs) != 6 {
					errs <- fmt.Errorf("Queues: %d queues, %v", len(qs), err)
					return
				}
				if _, err := d.Rings(); !errors.Is(err, ErrNotSupported) {
					errs <- fmt.Errorf("Rings on veth: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_, errCh := d.Channels()
	_, errQ := d.Queues()
	errSet := d.SetChannels(ChannelsConfig{})
	_, errNAPI := d.NAPIs(AllNAPIs())
	for name, err := range map[string]error{"Channels": errCh, "Queues": errQ, "SetChannels": errSet, "NAPIs": errNAPI} {
		if !errors.Is(err, ErrClosed) || !errors.Is(err, net.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// RXQueues counts a veth's RX queues (its channels) and follows a change
// of them; a device that does not exist is an error.
func TestRXQueues(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	pair := netnstest.New(t, netnstest.Config{Queues: 4})
	var n int
	if err := pair.A.Do(func() (err error) { n, err = RXQueues(pair.A.Link); return err }); err != nil || n != 4 {
		t.Fatalf("RXQueues: %d, %v; want 4", n, err)
	}
	hostRun(t, pair.A, "ethtool", "-L", pair.A.Link, "rx", "2")
	if err := pair.A.Do(func() (err error) { n, err = RXQueues(pair.A.Link); return err }); err != nil || n != 2 {
		t.Errorf("RXQueues after ethtool -L rx 2: %d, %v", n, err)
	}
	if _, err := RXQueues("nosuchdev0"); err == nil {
		t.Error("RXQueues of a missing device succeeded")
	}
}
