//go:build linux

package filter_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/filter"
	"github.com/xdpio/xdpio/internal/capset"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
	"golang.org/x/sys/unix"
)

// oracleExprs are the expressions checked against tcpdump: each
// supported construct alone, with qualifiers, and combined.
func oracleExprs() []string {
	es := []string{
		"ip", "ip6", "arp", "rarp", "tcp", "udp", "icmp", "icmp6", "sctp", "igmp", "ah", "esp",
		"ip and udp", "ip6 and tcp", "not ip", "not tcp and not udp", "tcp or udp", "icmp or icmp6",
		"ip proto 47", "ip proto 50", "ip6 proto 17", "ip6 proto 58", "proto 6", "proto 132", "ip proto \\udp",
		"ip6 proto \\tcp", "ether proto 0x88cc", "ether proto 0x0806", "ether proto \\ip6",
		"host 198.18.0.1", "host 198.18.0.2", "src host 198.18.0.1", "dst host 198.18.0.2",
		"src and dst host 198.18.0.1", "src or dst host 10.1.2.3", "ip host 198.19.1.1", "arp host 198.18.0.2",
		"rarp host 10.1.2.3", "host 2001:db8::1", "src host 2001:db8::1", "dst host 2001:db8::2",
		"ip6 host 2001:db8:1::5", "host 198.18.0.1 and host 198.18.0.2", "host 198.18.0.1 or 10.1.2.3",
		"net 198.18.0.0/15", "net 198.18.0.0/16", "src net 198.19.0.0/16", "dst net 10.0.0.0/8", "net 10",
		"net 198.18", "net 198.18.0.0 mask 255.255.0.0", "net 2001:db8::/32", "net 2001:db8:1::/48",
		"src net 2001:db8::/64", "dst net 2001:db8::/127", "not net 198.18.0.0/24", "arp net 198.18.0.0/24",
		"ip net 0.0.0.0/0", "net 198.18.0.2/32",
		"port 53", "port 80", "port 443", "port 4789", "port 9000", "port 22", "port 65535",
		"src port 53", "dst port 53", "tcp port 80", "udp port 53", "tcp dst port 80", "udp src port 4789",
		"sctp port 80", "sctp dst port 2905", "port 53 or 80", "port 53 or port 443 or port 22",
		"not port 53", "udp and not port 53", "src or dst port 9000", "src and dst port 9000",
		"portrange 1-1024", "portrange 1024-65535", "tcp portrange 20-25", "udp dst portrange 4000-5000",
		"src portrange 40000-40010", "portrange 80-80", "port domain", "tcp port http", "port https",
		"udp dst port 4789 and not src net 198.18.1.0/24", "udp dst port 9000",
		"tcp[tcpflags] & tcp-syn != 0", "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn",
		"tcp[tcpflags] & (tcp-syn|tcp-ack) == (tcp-syn|tcp-ack)", "tcp[tcpflags] & tcp-rst != 0",
		"tcp[tcpflags] & tcp-fin != 0 and tcp[tcpflags] & tcp-ack != 0", "tcp[tcpflags] == 0",
		"tcp[tcpflags] & (tcp-ece|tcp-cwr) != 0", "tcp[13] = 0xff", "tcp[13] & 0x3f = 0x18", "tcp[tcpflags] & tcp-push != 0",
		"tcp[tcpflags] & tcp-urg != 0", "tcp[0:2] = 443", "tcp[2:2] > 1000", "tcp[12] >> 4 = 5",
		"udp[0:2] = 53", "udp[2:2] = 4789", "udp[4:2] > 20", "udp[8] = 0x30", "udp[8:4] = 0x30313233",
		"icmp[icmptype] = icmp-echo", "icmp[icmptype] = icmp-echoreply", "icmp[icmptype] != icmp-echo and icmp[icmptype] != icmp-echoreply",
		"icmp[icmpcode] = 3", "icmp[0] = 3 and icmp[1] = 3", "icmp6[icmp6type] = icmp6-echo",
		"icmp6[icmp6type] = icmp6-neighborsolicit or icmp6[icmp6type] = icmp6-neighboradvert", "icmp6[0] > 128",
		"ip[0] & 0xf > 5", "ip[0] & 0xf = 5", "ip[6:2] & 0x3fff != 0", "ip[6:2] & 0x1fff != 0", "ip[6] & 0x20 != 0",
		"ip[6] & 0x40 != 0", "ip[8] = 64", "ip[9] = 17", "ip[2:2] > 100", "ip[12:4] = 0xc6120001", "ip[16] >= 224",
		"ip6[6] = 44", "ip6[6] = 0", "ip6[40] = 17", "ip6[4:2] > 20", "ip6[24] = 0xff", "ip6[0] & 0xf0 = 0x60",
		"ether[0] & 1 != 0", "ether[0:4] = 0xffffffff", "ether[12:2] = 0x8100", "ether[12:2] = 0x88a8", "ether[6:4] = 0x02000000",
		"arp[6:2] = 1", "arp[6:2] = 2", "arp[24:4] = 0xc6120002", "rarp[6:2] = 3",
		"ether host 02:00:00:00:00:01", "ether src 02:00:00:00:00:01", "ether dst 02:00:00:00:00:02",
		"ether dst ff:ff:ff:ff:ff:ff", "ether broadcast", "ether multicast", "broadcast", "multicast",
		"ip multicast", "ip6 multicast", "not ether broadcast and arp", "ether host 2:0:0:0:0:2",
		"vlan", "vlan 100", "vlan 101", "vlan 200", "vlan 10", "vlan 300", "vlan and ip", "vlan and udp",
		"vlan and udp port 4789", "vlan 100 and udp", "vlan and vlan", "vlan and vlan and ip",
		"vlan 20 and vlan 10", "vlan and arp", "vlan and ip6 and port 53", "vlan and host 198.18.0.1",
		"not vlan", "not vlan and udp", "vlan 5 and udp port 53", "vlan and tcp[tcpflags] & tcp-syn != 0",
		"udp or vlan and udp", "vlan and ether[14:2] & 0xfff = 100",
		"len > 100", "len < 60", "len <= 42", "len >= 1000", "len = 14", "less 64", "greater 500", "len > 60 and udp",
		"len - 14 > 50", "len * 2 > 200", "len / 4 = 15", "len % 7 = 0", "len & 1 = 1", "len | 1 = 61", "len ^ 0xff > 0x80",
		"len << 2 > 400", "len >> 1 > 40", "-len < 0xffffffa0", "ip[0] + ip[1] > 70", "ip[2:2] - 20 = len - 34",
		"ip[ip[0] & 0xf] = 0", "tcp[(tcp[12] >> 4) * 4 - 20] = 0", "udp[udp[4:2] - 8] = 0", "ip[6:2] & 0x3fff = 0 and udp[2:2] = 4789",
		"ip[0] & 0xf != 5 and ip[20] = 7", "tcp[0:2] = tcp[2:2]", "udp[0:2] = udp[2:2]", "ip[12:4] = ip[16:4]",
		"(tcp or udp) and not (port 22 or port 53)", "not (ip or ip6)", "not (arp or rarp) and not ip and not ip6",
		"(udp and port 53) or (tcp and port 80)", "((ip)) and ((udp))", "!tcp && !udp", "tcp || udp && port 53",
		"ip and not host 198.18.0.1 and not host 198.18.0.2", "host 198.18.0.1 and (port 53 or port 80)",
		"src host 198.18.0.1 and dst port 4789 or ip6 and dst port 53", "not not udp", "not (not tcp or not port 80)",
		"ip6 and not ip6 host 2001:db8::1", "icmp or arp or ip6 and icmp6", "(vlan and udp) or (not vlan and tcp)",
		"udp and len > 1000 or tcp and len < 60", "port 53 and not udp", "portrange 50-60 or portrange 4000-5000",
		"tcp and (tcp[tcpflags] & tcp-syn != 0) and not (tcp[tcpflags] & tcp-ack != 0)",
		"ip[9] = 6 and ip[6:2] & 0x1fff = 0 and tcp[13] & 2 != 0",
		"ip and ip[0] & 0xf > 5 and udp", "ip6 and ip6[6] != 6 and ip6[6] != 17",
		"host 198.18.0.1 or host 2001:db8::1", "net 198.18.0.0/15 and not net 198.19.0.0/16",
		"src net 198.18.0.0/24 and dst net 198.18.0.0/24", "ip and ip[16] & 0xf0 = 0xe0",
		"udp port 5353 and (ip multicast or ip6 multicast)", "ether[0] = 0x33 and ether[1] = 0x33",
		"port 53 and len > 50", "tcp[tcpflags] = tcp-syn or tcp[tcpflags] = (tcp-syn|tcp-ack)",
		"", "udp and udp[8:2] = 0x3031 and len > 40",
		"host ::1 or net ::/0 and udp", "tcp[13]&2!=0", "ip[6:2]&0x1fff=0&&udp", "src net ::ffff:0:0/96",
		"icmp6 and ip6[40] = 135", "ip6 and ip6[6] = 58 and ip6[40] = 1",
	}
	return es
}

// TestTcpdumpOracle: every frame of the capture set gets the same verdict
// from the compiled XDP program (under BPF_PROG_RUN) as from tcpdump -r.
// One program load per expression, paced.
func TestTcpdumpOracle(t *testing.T) {
	netnstest.RequirePriv(t)
	tcpdump := netnstest.RequireTool(t, "tcpdump")
	frames := append(capset.Frames(), kernelFrames(t)...)
	t.Logf("%d frames, %d expressions", len(frames), len(oracleExprs()))
	dir := t.TempDir()
	capFile := filepath.Join(dir, "set.pcap")
	var buf bytes.Buffer
	if err := capset.WritePcap(&buf, frames); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(capFile, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	exprs := oracleExprs()
	if len(exprs) < 200 {
		t.Fatalf("only %d expressions", len(exprs))
	}
	matchedSomething, matchedAll := 0, 0
	for _, expr := range exprs {
		want, err := tcpdumpVerdicts(tcpdump, capFile, dir, expr, len(frames))
		if err != nil {
			t.Errorf("%q: %v", expr, err)
			continue
		}
		got, err := xsk.Verdicts(xsk.ProgramConfig{Expr: expr}, frames)
		time.Sleep(2 * time.Millisecond) // no bursts of program loads
		if err != nil {
			t.Errorf("%q: %v", expr, err)
			continue
		}
		n, bad := 0, 0
		for i := range frames {
			if got[i] {
				n++
			}
			if got[i] != want[i] {
				bad++
				if bad <= 3 {
					prog, _ := filter.Compile(expr)
					t.Errorf("%q, frame %d (% x): XDP match=%v, tcpdump %v\n%v", expr, i, frames[i], got[i], want[i], prog)
				}
			}
		}
		if n > 0 {
			matchedSomething++
		}
		if n == len(frames) {
			matchedAll++
		}
	}
	// The set must discriminate: most expressions match some frames and
	// few match all.
	if matchedSomething < len(exprs)*9/10 || matchedAll > 3 {
		t.Errorf("of %d expressions %d matched a frame and %d every frame: the capture set does not exercise them", len(exprs), matchedSomething, matchedAll)
	}
}

// tcpdumpVerdicts runs tcpdump -r over the capture and returns, per frame,
// whether it printed the frame (read back through -w).
func tcpdumpVerdicts(tcpdump, capFile, dir, expr string, n int) ([]bool, error) {
	out := filepath.Join(dir, "out.pcap")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := []string{"-r", capFile, "-w", out}
	if expr != "" {
		args = append(args, "--", expr)
	}
	cmd := exec.CommandContext(ctx, tcpdump, args...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("tcpdump: %v: %s", err, strings.TrimSpace(string(msg)))
	}
	f, err := os.Open(out)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	_, idx, err := capset.ReadPcap(f)
	if err != nil {
		return nil, err
	}
	v := make([]bool, n)
	for _, i := range idx {
		if i < 0 || i >= n {
			return nil, fmt.Errorf("tcpdump wrote a frame stamped %d", i)
		}
		v[i] = true
	}
	return v, nil
}

// kernelFrames captures real kernel traffic on a veth pair (AF_PACKET on
// B, both directions): ARP and neighbour discovery for addresses without
// static neighbours, ping over IPv4 and IPv6, a TCP connection, and UDP
// datagrams over both families, some large enough to be fragmented.
func kernelFrames(t *testing.T) [][]byte {
	t.Helper()
	pair := netnstest.New(t, netnstest.Config{Queues: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	b4 := pair.B.IPv4.As4()
	b4[3] = 77
	b6 := pair.B.IPv6.As16()
	b6[15] = 0x77
	second4, second6 := netip.AddrFrom4(b4), netip.AddrFrom16(b6)
	for _, a := range []string{second4.String() + "/24", second6.String() + "/64"} {
		if out, err := pair.B.Command(ctx, "ip", "addr", "add", a, "dev", pair.B.Link, "nodad").CombinedOutput(); err != nil {
			t.Fatalf("ip addr add %s: %v %s", a, err, out)
		}
	}
	var fd int
	if err := pair.B.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: pair.B.Ifindex})
	}); err != nil {
		t.Fatalf("AF_PACKET socket: %v", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval((300 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := pair.B.Do(func() (err error) { ln, err = net.Listen("tcp", ":9170"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()

	ping := netnstest.RequireTool(t, "ping")
	for _, dst := range []netip.Addr{pair.B.IPv4, second4, pair.B.IPv6, second6} {
		pair.A.Command(ctx, ping, "-c", "1", "-W", "1", "-s", "100", dst.String()).Run()
	}
	if err := pair.A.Do(func() error {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(pair.B.IPv4.String(), "9170"), 2*time.Second)
		if err != nil {
			return err
		}
		c.Write([]byte("hello over TCP"))
		return c.Close()
	}); err != nil {
		t.Fatalf("TCP: %v", err)
	}
	for _, dst := range []netip.Addr{pair.B.IPv4, pair.B.IPv6} {
		for _, size := range []int{20, 3000} {
			if err := pair.A.Do(func() error {
				c, err := net.Dial("udp", net.JoinHostPort(dst.String(), "53"))
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = c.Write(make([]byte, size))
				return err
			}); err != nil {
				t.Fatalf("UDP to %v: %v", dst, err)
			}
		}
	}
	var frames [][]byte
	buf := make([]byte, 65536)
	for len(frames) < 200 {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			break // quiet for 300 ms
		}
		if n >= 14 {
			frames = append(frames, append([]byte(nil), buf[:n]...))
		}
	}
	if len(frames) < 20 {
		t.Fatalf("captured only %d frames of kernel traffic", len(frames))
	}
	return frames
}

// htons is v in network byte order, as AF_PACKET wants the protocol.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
