//go:build linux

package ethtool

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
	"github.com/xdpio/xdpio/internal/netnstest"
	"golang.org/x/sys/unix"
)

// inHost runs fn with a Client dialled inside h's namespace.
func inHost(t *testing.T, h *netnstest.Host, fn func(c *Client) error) {
	t.Helper()
	err := h.Do(func() error {
		c, err := Dial()
		if err != nil {
			return err
		}
		defer c.Close()
		return fn(c)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// run runs a tool in h's namespace and returns its combined output.
func run(t *testing.T, h *netnstest.Host, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	return string(out), err
}

func mustRun(t *testing.T, h *netnstest.Host, name string, args ...string) string {
	t.Helper()
	out, err := run(t, h, name, args...)
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return out
}

// parseEthtoolL parses `ethtool -l`: the maximums and current values,
// with "n/a" read as 0.
func parseEthtoolL(t *testing.T, out string) Channels {
	t.Helper()
	var ch Channels
	section := 0
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "Pre-set maximums"):
			section = 1
			continue
		case strings.HasPrefix(line, "Current hardware settings"):
			section = 2
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || section == 0 {
			continue
		}
		n := uint64(0)
		if v = strings.TrimSpace(v); v != "n/a" {
			var err error
			if n, err = strconv.ParseUint(v, 10, 32); err != nil {
				t.Fatalf("ethtool -l line %q: %v", line, err)
			}
		}
		dst := map[string][2]*uint32{
			"RX": {&ch.RXMax, &ch.RX}, "TX": {&ch.TXMax, &ch.TX},
			"Other": {&ch.OtherMax, &ch.Other}, "Combined": {&ch.CombinedMax, &ch.Combined},
		}[k]
		if dst[0] == nil {
			t.Fatalf("ethtool -l: unknown line %q", line)
		}
		*dst[section-1] = uint32(n)
	}
	if section != 2 {
		t.Fatalf("ethtool -l output not understood:\n%s", out)
	}
	return ch
}

func TestIntegrationChannels(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	pair := netnstest.New(t, netnstest.Config{Queues: 4})
	dev := Device{Name: pair.A.Link}

	var got Channels
	inHost(t, pair.A, func(c *Client) (err error) { got, err = c.Channels(dev); return })
	if d := cmp.Diff(parseEthtoolL(t, mustRun(t, pair.A, "ethtool", "-l", pair.A.Link)), got); d != "" {
		t.Errorf("Channels vs ethtool -l (-ethtool +client):\n%s", d)
	}
	if got.RXMax != 4 || got.TXMax != 4 {
		t.Errorf("veth with 4 queues reports maximums rx %d tx %d", got.RXMax, got.TXMax)
	}

	// Set rx 2 tx 2 while a monitor listens; ethtool, sysfs and the
	// notification must all see it.
	var notes []Notification
	inHost(t, pair.A, func(c *Client) error {
		mon, err := c.Monitor()
		if err != nil {
			return err
		}
		defer mon.Close()
		two := uint32(2)
		if err := c.SetChannels(Device{Index: pair.A.Ifindex}, ChannelsConfig{RX: &two, TX: &two}); err != nil {
			return err
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			ns, err := mon.Receive(deadline)
			if err != nil {
				return err
			}
			notes = append(notes, ns...)
			for _, n := range ns {
				if n.Kind == "channels" {
					return nil
				}
			}
		}
		return fmt.Errorf("no channels notification within 5s (got %+v)", notes)
	})
	ch := parseEthtoolL(t, mustRun(t, pair.A, "ethtool", "-l", pair.A.Link))
	if ch.RX != 2 || ch.TX != 2 {
		t.Errorf("ethtool -l after set rx 2 tx 2: %+v", ch)
	}
	// sysfs must be mounted for the namespace: ip netns exec does that.
	q := strings.Fields(mustRun(t, pair.A, "ls", "/sys/class/net/"+pair.A.Link+"/queues"))
	sort.Strings(q)
	if d := cmp.Diff([]string{"rx-0", "rx-1", "tx-0", "tx-1"}, q); d != "" {
		t.Errorf("/sys/class/net/%s/queues (-want +got):\n%s", pair.A.Link, d)
	}
	var ntf *Notification
	for i := range notes {
		if notes[i].Kind == "channels" {
			ntf = &notes[i]
		}
	}
	if ntf == nil || ntf.Channels.RX != 2 || ntf.Channels.TX != 2 || ntf.Device.Name != pair.A.Link || ntf.Device.Index != pair.A.Ifindex {
		t.Errorf("channels notification %+v", ntf)
	} else if ntf.Channels.RXMax != 4 {
		t.Errorf("notification maximums %+v", *ntf.Channels)
	}

	// Out of range: the kernel's own text, the same ethtool prints.
	var setErr error
	inHost(t, pair.A, func(c *Client) error {
		five := uint32(5)
		setErr = c.SetChannels(dev, ChannelsConfig{RX: &five})
		return nil
	})
	var e *Error
	if !errors.As(setErr, &e) || !errors.Is(setErr, unix.EINVAL) || e.Message == "" || e.Attr != "ETHTOOL_A_CHANNELS_RX_COUNT" {
		t.Fatalf("rx 5 on a 4-queue veth: %v", setErr)
	}
	out, err := run(t, pair.A, "ethtool", "-L", pair.A.Link, "rx", "5")
	if err == nil || !strings.Contains(out, e.Message) {
		t.Errorf("ethtool -L rx 5 said %q (err %v); client's extack message %q", out, err, e.Message)
	}
	if !strings.Contains(setErr.Error(), e.Message) {
		t.Errorf("error text %q lacks the kernel's message", setErr)
	}
}

// ethtoolKLegacy maps kernel feature names to the single-feature names
// `ethtool -k` prints instead.
var ethtoolKLegacy = map[string]string{
	"rx-checksum": "rx-checksumming", "rx-gro": "generic-receive-offload",
	"tx-generic-segmentation": "generic-segmentation-offload", "rx-lro": "large-receive-offload",
	"rx-vlan-hw-parse": "rx-vlan-offload", "tx-vlan-hw-insert": "tx-vlan-offload",
	"rx-ntuple-filter": "ntuple-filters", "rx-hashing": "receive-hashing",
}

var ethtoolKLine = regexp.MustCompile(`^\t?([a-z0-9-]+): (on|off)( \[fixed\])?$`)

// parseEthtoolK maps each name `ethtool -k` prints to (on, fixed).
func parseEthtoolK(out string) map[string][2]bool {
	m := map[string][2]bool{}
	for _, line := range strings.Split(out, "\n") {
		if s := ethtoolKLine.FindStringSubmatch(line); s != nil {
			m[s[1]] = [2]bool{s[2] == "on", s[3] != ""}
		}
	}
	return m
}

func compareFeatures(t *testing.T, fs Features, k map[string][2]bool) {
	t.Helper()
	matched := 0
	for _, f := range fs {
		name := f.Name
		if l, ok := ethtoolKLegacy[name]; ok {
			name = l
		}
		v, ok := k[name]
		if !ok {
			continue
		}
		matched++
		if v[0] != f.Active || v[1] != f.Fixed() {
			t.Errorf("%s: ethtool -k says on=%v fixed=%v, client says active=%v fixed=%v", f.Name, v[0], v[1], f.Active, f.Fixed())
		}
	}
	if matched < 30 {
		t.Errorf("only %d features matched ethtool -k's names", matched)
	}
}

func TestIntegrationFeatures(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	dev := Device{Name: pair.A.Link}
	names := []string{"tx-tcp-segmentation", "rx-gro", "rx-checksum"}
	for _, on := range []bool{false, true, false} {
		want := map[string]bool{}
		for _, n := range names {
			want[n] = on
		}
		var (
			res FeaturesResult
			fs  Features
		)
		inHost(t, pair.A, func(c *Client) (err error) {
			if res, err = c.SetFeatures(dev, want); err != nil {
				return err
			}
			fs, err = c.Features(dev)
			return err
		})
		if len(res.Refused) != 0 {
			t.Errorf("set %v: refused %+v", want, res.Refused)
		}
		k := parseEthtoolK(mustRun(t, pair.A, "ethtool", "-k", pair.A.Link))
		for _, n := range []string{"tx-tcp-segmentation", "generic-receive-offload", "rx-checksumming"} {
			if k[n][0] != on {
				t.Errorf("after setting %v: ethtool -k shows %s %v", on, n, k[n][0])
			}
		}
		compareFeatures(t, fs, k)
	}
	// The monitor sees a feature change, with the new state.
	inHost(t, pair.A, func(c *Client) error {
		mon, err := c.Monitor()
		if err != nil {
			return err
		}
		defer mon.Close()
		if _, err := c.SetFeatures(dev, map[string]bool{"rx-gro": true}); err != nil {
			return err
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			ns, err := mon.Receive(deadline)
			if err != nil {
				return err
			}
			for _, n := range ns {
				if n.Kind != "features" {
					continue
				}
				f, ok := n.Features.Lookup("rx-gro")
				if !ok || !f.Active || n.Device.Name != pair.A.Link {
					t.Errorf("features notification: rx-gro %+v (found %v), device %+v", f, ok, n.Device)
				}
				return nil
			}
		}
		return fmt.Errorf("no features notification within 5s")
	})
	// A fixed feature is refused, and the reply says so.
	var res FeaturesResult
	inHost(t, pair.A, func(c *Client) (err error) {
		res, err = c.SetFeatures(dev, map[string]bool{"rx-ntuple-filter": true})
		return err
	})
	if d := cmp.Diff([]FeatureChange{{Name: "rx-ntuple-filter", Wanted: true, Active: false}}, res.Refused); d != "" {
		t.Errorf("refused (-want +got):\n%s", d)
	}
}

func TestIntegrationNotSupportedOnVeth(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	dev := Device{Name: pair.A.Link}
	hf := HashToeplitz
	inHost(t, pair.A, func(c *Client) error {
		_, errR := c.Rings(dev)
		_, errC := c.Coalesce(dev)
		_, errS := c.RSS(dev, 0)
		errSR := c.SetRings(dev, RingsConfig{RX: u32p(512)})
		errSC := c.SetCoalesce(dev, Coalesce{RXUsecs: u32p(50)})
		errSS := c.SetRSS(dev, RSSConfig{HFunc: &hf, Indir: []uint32{0, 1, 0, 1}, Key: make([]byte, 40)})
		for name, err := range map[string]error{"RINGS_GET": errR, "COALESCE_GET": errC, "RSS_GET": errS, "RINGS_SET": errSR, "COALESCE_SET": errSC, "RSS_SET": errSS} {
			if !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) || !strings.Contains(err.Error(), name) {
				t.Errorf("%s on veth: %v, want ErrNotSupported with EOPNOTSUPP", name, err)
			}
			t.Logf("%s on veth: %v", name, err)
		}
		return nil
	})
}

// canonAttrs turns an attribute stream into canonical strings, one per
// top-level attribute: "type=hex" for a leaf and "type{…}" for a nest
// whose children are canonicalised and sorted. Equal results mean the
// same attributes with the same values, in any order.
func canonAttrs(b []byte) ([]string, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, err
	}
	var out []string
	for ad.Next() {
		if ad.TypeFlags()&netlink.Nested != 0 {
			kids, err := canonAttrs(ad.Bytes())
			if err != nil {
				return nil, err
			}
			out = append(out, fmt.Sprintf("%d{%s}", ad.Type(), strings.Join(kids, ",")))
		} else {
			out = append(out, fmt.Sprintf("%d=%x", ad.Type(), ad.Bytes()))
		}
	}
	sort.Strings(out)
	return out, ad.Err()
}

// dropHeaderFlags removes ETHTOOL_A_HEADER_FLAGS from a canonical request:
// which reply form a program asks for legitimately differs.
var headerFlagsRE = regexp.MustCompile(`(,)?3=[0-9a-f]{8}`)

func canonRequest(t *testing.T, b []byte) []string {
	t.Helper()
	c, err := canonAttrs(b)
	if err != nil {
		t.Fatalf("decode request: %v", err)
	}
	for i, s := range c {
		if strings.HasPrefix(s, "1{") {
			s = headerFlagsRE.ReplaceAllString(s, "")
			c[i] = strings.Replace(s, "1{,", "1{", 1)
		}
	}
	return c
}

// TestEncodingOracleEthtool runs the real ethtool under strace for a
// request and requires the client to encode the same attributes (order
// and header flags aside). ethtool fails on veth for coalescing and rings,
// but sends its request first.
func TestEncodingOracleEthtool(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	netnstest.RequireTool(t, "strace")
	pair := netnstest.New(t, netnstest.Config{Queues: 4})
	dev := Device{Name: pair.A.Link}
	cases := []struct {
		name string
		args []string
		req  request
	}{
		{"channels", []string{"-L", dev.Name, "rx", "2", "tx", "3"},
			request{cmd: unix.ETHTOOL_MSG_CHANNELS_SET, dev: dev, encode: encodeChannels(ChannelsConfig{RX: u32p(2), TX: u32p(3)})}},
		{"channels-combined-other", []string{"-L", dev.Name, "combined", "1", "other", "1"},
			request{cmd: unix.ETHTOOL_MSG_CHANNELS_SET, dev: dev, encode: encodeChannels(ChannelsConfig{Combined: u32p(1), Other: u32p(1)})}},
		{"coalesce-rx-usecs", []string{"-C", dev.Name, "rx-usecs", "50"},
			request{cmd: unix.ETHTOOL_MSG_COALESCE_SET, dev: dev, encode: encodeCoalesce(Coalesce{RXUsecs: u32p(50)})}},
		{"coalesce-all", strings.Fields("-C " + dev.Name + " rx-usecs 50 rx-frames 8 rx-usecs-irq 1 rx-frames-irq 2 tx-usecs 20 tx-frames 16 tx-usecs-irq 3 tx-frames-irq 4 stats-block-usecs 5 adaptive-rx on adaptive-tx off pkt-rate-low 6 rx-usecs-low 7 rx-frames-low 8 tx-usecs-low 9 tx-frames-low 10 pkt-rate-high 11 rx-usecs-high 12 rx-frames-high 13 tx-usecs-high 14 tx-frames-high 15 sample-interval 16 cqe-mode-rx on cqe-mode-tx off"),
			request{cmd: unix.ETHTOOL_MSG_COALESCE_SET, dev: dev, encode: encodeCoalesce(Coalesce{
				RXUsecs: u32p(50), RXMaxFrames: u32p(8), RXUsecsIRQ: u32p(1), RXMaxFramesIRQ: u32p(2),
				TXUsecs: u32p(20), TXMaxFrames: u32p(16), TXUsecsIRQ: u32p(3), TXMaxFramesIRQ: u32p(4),
				StatsBlockUsecs: u32p(5), UseAdaptiveRX: boolp(true), UseAdaptiveTX: boolp(false),
				PktRateLow: u32p(6), RXUsecsLow: u32p(7), RXMaxFramesLow: u32p(8), TXUsecsLow: u32p(9), TXMaxFramesLow: u32p(10),
				PktRateHigh: u32p(11), RXUsecsHigh: u32p(12), RXMaxFramesHigh: u32p(13), TXUsecsHigh: u32p(14), TXMaxFramesHigh: u32p(15),
				RateSampleInterval: u32p(16), UseCQEModeRX: boolp(true), UseCQEModeTX: boolp(false),
			})}},
		{"rings", strings.Fields("-G " + dev.Name + " rx 512 rx-mini 16 rx-jumbo 32 tx 1024 rx-buf-len 4096 cqe-size 128 tx-push on"),
			request{cmd: unix.ETHTOOL_MSG_RINGS_SET, dev: dev, encode: encodeRings(RingsConfig{
				RX: u32p(512), RXMini: u32p(16), RXJumbo: u32p(32), TX: u32p(1024), RXBufLen: u32p(4096), CQESize: u32p(128), TXPush: boolp(true)})}},
		{"features", []string{"-K", dev.Name, "tx-tcp-segmentation", "off", "rx-gro", "on", "rx-checksum", "off"},
			request{cmd: unix.ETHTOOL_MSG_FEATURES_SET, dev: dev, flags: FlagCompactBitsets,
				encode: encodeFeaturesSet([]string{"rx-checksum", "rx-gro", "tx-tcp-segmentation"}, map[string]bool{"rx-gro": true})}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-f", "-e", "trace=sendto,sendmsg", "-xx", "-s", "65536", "ethtool"}, tc.args...)
			out, _ := run(t, pair.A, "strace", args...) // ethtool may fail on veth
			msgs, err := parseStrace(out)
			if err != nil {
				t.Fatal(err)
			}
			var theirs []byte
			found := false
			for _, m := range msgs {
				if m.typ == "ethtool" && m.cmd == tc.req.cmd {
					theirs, found = m.attrs, true
				}
			}
			if !found {
				t.Fatalf("ethtool sent no %s:\n%s", opName(tc.req.cmd), out)
			}
			ours, err := encodeRequest(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(canonRequest(t, theirs), canonRequest(t, ours)); d != "" {
				t.Errorf("%s attributes (-ethtool +client):\n%s", opName(tc.req.cmd), d)
			}
		})
	}
}

// TestEncodingOracleKernelPolicy checks every SET request the client can
// build against the policy the running kernel validates it with (the
// controller's policy dump): RSS_SET has no ethtool 6.1 oracle (ethtool
// uses the ioctl), so the kernel itself is the oracle. Then it sends
// RSS_SET to veth: strict policy validation runs before the driver is
// asked, so EOPNOTSUPP (not EINVAL) means the kernel accepted the
// encoding; a deliberately mis-typed HFUNC shows the check can fail.
func TestEncodingOracleKernelPolicy(t *testing.T) {
	netnstest.RequirePriv(t)
	hf, x := HashToeplitz, XfrmSymXOR
	tds := TCPDataSplitEnabled
	allCo := Coalesce{}
	for i, a := range coalesceU32 {
		*a.field(&allCo) = u32p(uint32(i + 1))
	}
	for _, a := range coalesceBool {
		*a.field(&allCo) = boolp(true)
	}
	allCo.RXProfile = []IRQModeration{{Usec: u32p(1), Pkts: u32p(2), Comps: u32p(3)}}
	allCo.TXProfile = []IRQModeration{{Usec: u32p(1)}}
	dev := Device{Name: "veth-a", Index: 7}
	reqs := []request{
		{cmd: unix.ETHTOOL_MSG_CHANNELS_SET, dev: dev, flags: FlagOmitReply, encode: encodeChannels(ChannelsConfig{RX: u32p(1), TX: u32p(1), Other: u32p(1), Combined: u32p(1)})},
		{cmd: unix.ETHTOOL_MSG_RINGS_SET, dev: dev, encode: encodeRings(RingsConfig{RX: u32p(1), RXMini: u32p(1), RXJumbo: u32p(1), TX: u32p(1), RXBufLen: u32p(1),
			TCPDataSplit: &tds, CQESize: u32p(1), TXPush: boolp(true), RXPush: boolp(true), TXPushBufLen: u32p(1), HDSThresh: u32p(1)})},
		{cmd: unix.ETHTOOL_MSG_COALESCE_SET, dev: dev, encode: encodeCoalesce(allCo)},
		{cmd: unix.ETHTOOL_MSG_FEATURES_SET, dev: dev, flags: FlagCompactBitsets, encode: encodeFeaturesSet([]string{"rx-gro"}, map[string]bool{"rx-gro": true})},
		{cmd: msgRSSSet, dev: dev, encode: encodeRSSSet(RSSConfig{Context: 1, HFunc: &hf, Indir: []uint32{0, 1}, Key: []byte{1, 2, 3, 4}, InputXfrm: &x,
			FlowHash: map[FlowType]HashFields{FlowEther: HashL2DA, FlowTCP4: HashIPSrcDst | HashL4Src | HashL4Dst, FlowGTPUDL6: HashGTPTEID}})},
		{cmd: unix.ETHTOOL_MSG_RSS_GET, dev: dev, encode: func(ae *netlink.AttributeEncoder) { ae.Uint32(aRSSContext, 1) }},
		{cmd: msgRSSCreateAct, dev: dev, encode: encodeRSSSet(RSSConfig{Context: 2, HFunc: &hf, Indir: []uint32{0, 1}, Key: []byte{1, 2, 3, 4}, InputXfrm: &x})},
		{cmd: msgRSSDeleteAct, dev: dev, encode: func(ae *netlink.AttributeEncoder) { ae.Uint32(aRSSContext, 2) }},
		{cmd: unix.ETHTOOL_MSG_STRSET_GET, dev: dev, encode: func(ae *netlink.AttributeEncoder) {
			ae.Nested(unix.ETHTOOL_A_STRSET_STRINGSETS, func(n *netlink.AttributeEncoder) error {
				n.Nested(unix.ETHTOOL_A_STRINGSETS_STRINGSET, func(s *netlink.AttributeEncoder) error {
					s.Uint32(unix.ETHTOOL_A_STRINGSET_ID, ssFeatures)
					return nil
				})
				return nil
			})
		}},
	}
	c, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, r := range reqs {
		pols, top, err := kernelPolicy(c, r.cmd)
		if err != nil {
			t.Fatalf("%s: %v", opName(r.cmd), err)
		}
		b, err := encodeRequest(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkAgainstPolicy(pols, top, b, opName(r.cmd)); err != nil {
			t.Errorf("kernel policy rejects the client's encoding: %v", err)
		}
	}

	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	inHost(t, pair.A, func(c *Client) error {
		err := c.SetRSS(Device{Name: pair.A.Link}, RSSConfig{HFunc: &hf, Indir: []uint32{0, 1, 1, 0}, Key: make([]byte, 40), InputXfrm: &x})
		if !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("well-formed RSS_SET on veth: %v, want EOPNOTSUPP from the driver check", err)
		}
		_, err = c.CreateRSSContext(Device{Name: pair.A.Link}, RSSConfig{Indir: []uint32{0, 1}})
		if !errors.Is(err, ErrNotSupported) {
			t.Errorf("RSS_CREATE_ACT on veth: %v, want ErrNotSupported", err)
		}
		t.Logf("RSS_CREATE_ACT on veth: %v", err)
		err = c.DeleteRSSContext(Device{Name: pair.A.Link}, 1)
		if !errors.Is(err, ErrNotSupported) && !errors.Is(err, unix.ENOENT) {
			t.Errorf("RSS_DELETE_ACT on veth: %v", err)
		}
		t.Logf("RSS_DELETE_ACT on veth: %v", err)
		// Negative control: HFUNC as a u8 fails the kernel's policy.
		_, err = c.do(request{cmd: msgRSSSet, dev: Device{Name: pair.A.Link}, encode: func(ae *netlink.AttributeEncoder) { ae.Uint8(aRSSHFunc, 1) }})
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, unix.EINVAL) || e.Attr != "ETHTOOL_A_RSS_HFUNC" {
			t.Errorf("mis-typed RSS_SET: %v, want EINVAL blaming ETHTOOL_A_RSS_HFUNC", err)
		}
		t.Logf("mis-typed HFUNC: %v", err)
		return nil
	})
}

// TestReadOnlyEth0 compares GETs on the machine's pre-existing eth0 with
// ethtool's view. It never changes eth0.
func TestReadOnlyEth0(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	if _, err := exec.Command("ip", "link", "show", "eth0").Output(); err != nil {
		netnstest.SkipIfMachineLacks(t, "eth0", "does not exist")
	}
	ethtool := func(args ...string) (string, error) {
		out, err := exec.Command("ethtool", args...).CombinedOutput()
		return string(out), err
	}
	c, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dev := Device{Name: "eth0"}

	ch, err := c.Channels(dev)
	if out, e := ethtool("-l", "eth0"); e == nil {
		if err != nil {
			t.Errorf("Channels(eth0): %v", err)
		} else if d := cmp.Diff(parseEthtoolL(t, out), ch); d != "" {
			t.Errorf("eth0 channels (-ethtool +client):\n%s", d)
		}
		t.Logf("eth0 channels: %+v", ch)
	} else if !errors.Is(err, ErrNotSupported) {
		t.Errorf("ethtool -l eth0 fails but Channels says %v", err)
	}

	r, err := c.Rings(dev)
	if out, e := ethtool("-g", "eth0"); e == nil {
		if err != nil {
			t.Fatalf("Rings(eth0): %v", err)
		}
		want := map[string]uint32{}
		section := ""
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "Pre-set") || strings.HasPrefix(line, "Current") {
				section = line[:3]
			}
			k, v, ok := strings.Cut(line, ":")
			if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); ok && err == nil {
				want[section+k] = uint32(n)
			}
		}
		got := map[string]uint32{}
		for k, v := range map[string]uint32{"PreRX": r.RXMax, "PreRX Mini": r.RXMiniMax, "PreRX Jumbo": r.RXJumboMax, "PreTX": r.TXMax,
			"CurRX": r.RX, "CurRX Mini": r.RXMini, "CurRX Jumbo": r.RXJumbo, "CurTX": r.TX, "CurRX Buf Len": r.RXBufLen, "CurCQE Size": r.CQESize} {
			if v != 0 {
				got[k] = v
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("eth0 rings (-ethtool +client):\n%s", d)
		}
		t.Logf("eth0 rings: %+v", r)
	}

	co, err := c.Coalesce(dev)
	if out, e := ethtool("-c", "eth0"); e == nil {
		if err != nil {
			t.Fatalf("Coalesce(eth0): %v", err)
		}
		// ethtool -c prints "name: value" or "n/a" for each parameter.
		names := map[string]func(*Coalesce) **uint32{
			"rx-usecs": func(c *Coalesce) **uint32 { return &c.RXUsecs }, "rx-frames": func(c *Coalesce) **uint32 { return &c.RXMaxFrames },
			"rx-usecs-irq": func(c *Coalesce) **uint32 { return &c.RXUsecsIRQ }, "rx-frames-irq": func(c *Coalesce) **uint32 { return &c.RXMaxFramesIRQ },
			"tx-usecs": func(c *Coalesce) **uint32 { return &c.TXUsecs }, "tx-frames": func(c *Coalesce) **uint32 { return &c.TXMaxFrames },
			"tx-usecs-irq": func(c *Coalesce) **uint32 { return &c.TXUsecsIRQ }, "tx-frames-irq": func(c *Coalesce) **uint32 { return &c.TXMaxFramesIRQ },
			"stats-block-usecs": func(c *Coalesce) **uint32 { return &c.StatsBlockUsecs }, "sample-interval": func(c *Coalesce) **uint32 { return &c.RateSampleInterval },
			"pkt-rate-low": func(c *Coalesce) **uint32 { return &c.PktRateLow }, "pkt-rate-high": func(c *Coalesce) **uint32 { return &c.PktRateHigh },
			"rx-usecs-low": func(c *Coalesce) **uint32 { return &c.RXUsecsLow }, "rx-frame-low": func(c *Coalesce) **uint32 { return &c.RXMaxFramesLow },
			"tx-usecs-low": func(c *Coalesce) **uint32 { return &c.TXUsecsLow }, "tx-frame-low": func(c *Coalesce) **uint32 { return &c.TXMaxFramesLow },
			"rx-usecs-high": func(c *Coalesce) **uint32 { return &c.RXUsecsHigh }, "rx-frame-high": func(c *Coalesce) **uint32 { return &c.RXMaxFramesHigh },
			"tx-usecs-high": func(c *Coalesce) **uint32 { return &c.TXUsecsHigh }, "tx-frame-high": func(c *Coalesce) **uint32 { return &c.TXMaxFramesHigh },
		}
		seen := 0
		for _, line := range strings.Split(out, "\n") {
			k, v, ok := strings.Cut(line, ":")
			f, known := names[k]
			if !ok || !known {
				continue
			}
			seen++
			got := *f(&co)
			v = strings.TrimSpace(v)
			if v == "n/a" {
				if got != nil {
					t.Errorf("eth0 %s: ethtool n/a, client %d", k, *got)
				}
				continue
			}
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				t.Fatalf("ethtool -c line %q", line)
			}
			if got == nil || *got != uint32(n) {
				t.Errorf("eth0 %s: ethtool %d, client %v", k, n, got)
			}
		}
		if seen != len(names) {
			t.Errorf("matched %d of %d ethtool -c parameters:\n%s", seen, len(names), out)
		}
		m := regexp.MustCompile(`Adaptive RX: (on|off|n/a)\s+TX: (on|off|n/a)`).FindStringSubmatch(out)
		for i, b := range []*bool{co.UseAdaptiveRX, co.UseAdaptiveTX} {
			want := m[i+1]
			got := "n/a"
			if b != nil {
				got = map[bool]string{true: "on", false: "off"}[*b]
			}
			if m == nil || got != want {
				t.Errorf("eth0 adaptive %d: ethtool %q, client %q", i, want, got)
			}
		}
		t.Logf("eth0 coalesce: rx-usecs %v rx-frames %v adaptive-rx %v", deref(co.RXUsecs), deref(co.RXMaxFrames), co.UseAdaptiveRX != nil && *co.UseAdaptiveRX)
	}

	rs, err := c.RSS(dev, 0)
	if err == nil {
		out, _ := ethtool("-x", "eth0")
		name := rs.HFuncNames[rs.HFunc]
		if rs.HFunc != 0 && !strings.Contains(out, "    "+name+": on") {
			t.Errorf("eth0 hash function %q not on in ethtool -x:\n%s", name, out)
		}
		t.Logf("eth0 RSS: hfunc %s, %d-entry table, %d-byte key", name, len(rs.Indir), len(rs.Key))
	} else if !errors.Is(err, ErrNotSupported) {
		t.Errorf("RSS(eth0): %v", err)
	}

	fs, err := c.Features(dev)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ethtool("-k", "eth0")
	if err != nil {
		t.Fatal(err)
	}
	compareFeatures(t, fs, parseEthtoolK(out))
}

func deref(p *uint32) any {
	if p == nil {
		return "n/a"
	}
	return *p
}

// TestFeaturesVerboseEqualsCompact asks the kernel for the features of a
// veth in both bitset forms and requires the same states: the verbose
// decoder (names and bits from the kernel) and the compact one (words plus
// the string set) must agree.
func TestFeaturesVerboseEqualsCompact(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	dev := Device{Name: pair.A.Link}
	inHost(t, pair.A, func(c *Client) error {
		compact, err := c.Features(dev)
		if err != nil {
			return err
		}
		msgs, err := c.do(request{cmd: unix.ETHTOOL_MSG_FEATURES_GET, dev: dev})
		if err != nil {
			return err
		}
		verbose, err := decodeFeatures(msgs[0].Data, nil)
		if err != nil {
			return err
		}
		if len(verbose) != len(compact) {
			t.Fatalf("verbose %d features, compact %d", len(verbose), len(compact))
		}
		named := 0
		for i := range compact {
			v, c := verbose[i], compact[i]
			if v.Active != c.Active || v.Wanted != c.Wanted || v.Changeable != c.Changeable || v.NoChange != c.NoChange {
				t.Errorf("bit %d (%s): verbose %+v, compact %+v", i, c.Name, v, c)
			}
			if v.Name != "" {
				named++
				if v.Name != c.Name {
					t.Errorf("bit %d: verbose name %q, string set %q", i, v.Name, c.Name)
				}
			}
		}
		if named < 10 {
			t.Errorf("verbose reply named only %d bits", named)
		}
		return nil
	})
}

// TestRSSContextsDump dumps eth0's RSS contexts (read-only) and compares
// context 0 with a plain RSS_GET; veth, without RSS, has none.
func TestRSSContextsDump(t *testing.T) {
	c, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dev := Device{Name: "eth0"}
	one, err := c.RSS(dev, 0)
	if errors.Is(err, ErrNotSupported) {
		netnstest.SkipIfMachineLacks(t, "eth0", "has no RSS")
	}
	if err != nil {
		t.Fatal(err)
	}
	all, err := c.RSSContexts(dev)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 || all[0].Context != 0 || all[0].HFunc != one.HFunc || !cmp.Equal(all[0].Indir, one.Indir) || !cmp.Equal(all[0].Key, one.Key) {
		t.Errorf("dump %+v, context 0 %+v", all, one)
	}
	t.Logf("eth0 has %d RSS context(s)", len(all))
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	inHost(t, pair.A, func(c *Client) error {
		if _, err := c.RSSContexts(Device{Name: pair.A.Link}); !errors.Is(err, ErrNotSupported) {
			t.Errorf("veth RSS dump: %v, want ErrNotSupported", err)
		}
		return nil
	})
}

// rxFlowHashLines maps the lines `ethtool -n DEV rx-flow-hash T` prints
// to hash field bits.
var rxFlowHashLines = map[string]HashFields{
	"L2DA": HashL2DA, "VLAN tag": HashVLAN, "L3 proto": HashL3Proto, "IP SA": HashIPSrc, "IP DA": HashIPDst,
	"L4 bytes 0 & 1 [TCP/UDP src port]": HashL4Src, "L4 bytes 2 & 3 [TCP/UDP dst port]": HashL4Dst,
}

// TestFlowHashEth0 compares eth0's per-flow-type hash fields (RSS_GET's
// FLOW_HASH) with `ethtool -n eth0 rx-flow-hash T` (the ioctl), read-only.
func TestFlowHashEth0(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	c, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.RSS(Device{Name: "eth0"}, 0)
	if errors.Is(err, ErrNotSupported) || (err == nil && r.FlowHash == nil) {
		netnstest.SkipIfMachineLacks(t, "eth0", fmt.Sprintf("reports no flow hash fields (%v)", err))
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, ft := range []FlowType{FlowTCP4, FlowUDP4, FlowSCTP4, FlowAH4, FlowESP4, FlowTCP6, FlowUDP6, FlowSCTP6, FlowAH6, FlowESP6} {
		out, err := exec.Command("ethtool", "-n", "eth0", "rx-flow-hash", ft.String()).CombinedOutput()
		if err != nil {
			t.Logf("ethtool -n eth0 rx-flow-hash %s: %v: %s", ft, err, out)
			continue
		}
		var want HashFields
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		for _, l := range lines[1:] {
			l = strings.TrimSpace(l)
			if l == "None" || l == "" {
				continue
			}
			bit, ok := rxFlowHashLines[l]
			if !ok {
				t.Fatalf("ethtool line %q not understood", l)
			}
			want |= bit
		}
		if got := r.FlowHash[ft]; got != want {
			t.Errorf("eth0 %s: RSS_GET %s, ethtool -n %s", ft, got, want)
		}
	}
	t.Logf("eth0 flow hash: tcp4 %s, udp4 %s", r.FlowHash[FlowTCP4], r.FlowHash[FlowUDP4])
}

// TestRSSIoctlOnVeth: the SRSSH fallback (kernels before RSS_SET) asks the
// driver for its sizes first; veth has no RSS, and the answer is
// ErrNotSupported with the kernel's EOPNOTSUPP, the device unchanged.
// (The lab runs the fallback's success path on a 6.12 kernel.)
func TestRSSIoctlOnVeth(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	err := pair.A.Do(func() error {
		return setRSSIoctl(Device{Name: pair.A.Link}, RSSConfig{Indir: []uint32{0, 1, 0, 1}})
	})
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) || !strings.Contains(err.Error(), "GRSSH") {
		t.Errorf("SRSSH fallback on veth: %v, want ErrNotSupported from GRSSH", err)
	}
}
