package filter

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
)

func TestCompileRefuses(t *testing.T) {
	for _, tc := range []struct {
		expr, construct string
		unsupported     bool
	}{
		{"ip protochain 6", "protochain", true},
		{"gateway router", "gateway", true},
		{"host example.com", "example.com", true},
		{"mpls 5 and udp", "mpls", true},
		{"udp and pppoes", "pppoes", true},
		{"inbound", "inbound", true},
		{"ip broadcast", "broadcast", true},
		{"port http-alt", "http-alt", true},
		{"pim[0] = 1", "pim", true},
		{"udp port", "", false},
		{"port 70000", "70000", false},
		{"tcp[13] & 2 !=", "", false},
		{"(udp", "", false},
		{"udp)", ")", false},
		{"net 198.18.0.1/15", "198.18.0.1/15", false},
		{"ip[0:3] = 1", "3", false},
		{"ip[0] / 0 = 1", "/", false},
		{"vlan 5000", "5000", false},
		{"tcp host 1.2.3.4", "1.2.3.4", true},
		{"ip6 host 1.2.3.4", "1.2.3.4", true},
		{"ip host 2001:db8::1", "2001:db8::1", false},
		{"udp and $", "$", false},
		{"udp dst prot 9000", "prot", true},
		{"host prot", "prot", true},
		{"udp port 53 adn tcp", "adn", false},
		// Refused by tcpdump, so refused here (issue #26, item 9): a
		// shift by more than 31 bits or a division by zero, as
		// libpcap's code generator and optimizer find them.
		{"len >> 40 = 1", ">>", false},
		{"len << 32 = 0", "<<", false},
		{"len >> (20 + 20) = 1", ">>", false},
		{"len >> (40 + len) = 1", ">>", false},
		{"len >> ip[40] = 1", ">>", false},
		{"len >> -1 = 1", ">>", false},
		{"len / ip[0] = 1", "/", false},
		{"len % (len * 0) = 1", "%", false},
		{"5 / (1 - 1) = 1", "/", false},
		// Filters that match nothing by comparisons of numbers.
		{"0 = 1", "", false},
		{"udp and not 1 = 1", "", false},
		// A bare id needs qualifiers from the primitive before it.
		{"80", "80", false},
		{"udp or 80", "80", false},
		{"(port 53) or 80", "80", false},
		{"port 53 or (80 and udp)", "udp", false},
		{"port 53 or ((80 or 81) or 82)", "(", false},
		// Names: keywords need a backslash, service names their
		// protocol, port ranges decimal numbers.
		{"proto tcp", "tcp", false},
		{"ip proto \\icmp6", "\\icmp6", true},
		{"udp port http", "http", false},
		{"portrange 0x10-0x20", "0x10-0x20", false},
		{"portrange 1-0x10000", "1-0x10000", true},
		{"ether host 02:00-00:00:00:01", "02:00-00:00:00:01", false},
		{"host 10", "10", true},
		{"host 1.2.3", "1.2.3", true},
		{"net 10/8", "10/8", false},
		{"net 10.0.0.0/33", "10.0.0.0/33", false},
		{"net 10.1.0.0 mask 255.0.0.0", "10.1.0.0", false},
	} {
		_, err := Compile(tc.expr)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Compile(%q) = %v, want an *Error", tc.expr, err)
			continue
		}
		if e.Construct != tc.construct || e.Unsupported != tc.unsupported || errors.Is(err, ErrUnsupportedConstruct) != tc.unsupported {
			t.Errorf("Compile(%q): construct %q unsupported %v, want %q %v (%v)", tc.expr, e.Construct, e.Unsupported, tc.construct, tc.unsupported, err)
		}
		if !strings.Contains(err.Error(), tc.construct) {
			t.Errorf("Compile(%q): %q does not name %q", tc.expr, err, tc.construct)
		}
	}
}

// A word in a host position that is one or two edits from a keyword is
// probably that keyword misspelt: the error says which; a word after an
// explicit "host" is a host name, and short names far from a keyword
// (ftp, web) get no guess.
func TestMisspeltKeyword(t *testing.T) {
	for _, tc := range []struct{ expr, want, not string }{
		{"udp dst prot 9000", `"prot" at offset 8: unknown word; did you mean "port"? (host names need name resolution, which xdpio does not do: give an address)`, ""},
		{"src hsot 198.18.0.1", `did you mean "host"?`, ""},
		{"udp portrang 1-2", `did you mean "portrange"?`, ""},
		{"udp and nto tcp", `did you mean "not"?`, ""},
		{"udp port 53 adn tcp", `expected and, or or the end of the expression; did you mean "and"?`, ""},
		{"host prot", "host names need name resolution", "did you mean"},
		// A bare word needs qualifiers, its own or from the primitive
		// before (tcpdump refuses these too).
		{"ftp", "needs a qualifier", "did you mean"},
		{"udp and web", "needs a qualifier", "did you mean"},
	} {
		_, err := Compile(tc.expr)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.want) || tc.not != "" && strings.Contains(err.Error(), tc.not) {
			t.Errorf("Compile(%q) = %v, want an *Error saying %q", tc.expr, err, tc.want)
		}
	}
	for _, tc := range []struct{ w, want string }{
		{"prot", "port"}, {"proot", "proto"}, {"hots", "host"}, {"dts", "dst"}, {"adn", "and"},
		{"port", ""}, {"ftp", ""}, {"198.18.0.1", ""}, {"0:1:2:3:4:5", ""}, {"x", ""},
	} {
		if got := suggestKeyword(tc.w); got != tc.want {
			t.Errorf("suggestKeyword(%q) = %q, want %q", tc.w, got, tc.want)
		}
	}
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"", "abc", 3}, {"prot", "port", 1}, {"prot", "proto", 1}, {"kitten", "sitting", 3}, {"ca", "abc", 3}} {
		if got := editDistance(tc.a, tc.b); got != tc.d || editDistance(tc.b, tc.a) != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

// TestCompileSemantics spot-checks verdicts in the x/net/bpf VM (the
// tcpdump oracle test covers the rest).
func TestCompileSemantics(t *testing.T) {
	udp4 := func(sport, dport uint16) []byte {
		f := make([]byte, 14+20+8)
		f[12], f[13] = 0x08, 0x00
		f[14] = 0x45
		f[23] = 17
		copy(f[26:], []byte{198, 18, 0, 1})
		copy(f[30:], []byte{198, 18, 1, 2})
		f[34], f[35], f[36], f[37] = byte(sport>>8), byte(sport), byte(dport>>8), byte(dport)
		return f
	}
	tcp4 := func(sport, dport uint16) []byte {
		f := udp4(sport, dport)
		f[23] = 6
		return append(f, make([]byte, 12)...)
	}
	arp := make([]byte, 42)
	arp[12], arp[13] = 0x08, 0x06
	for _, tc := range []struct {
		expr  string
		frame []byte
		want  bool
	}{
		{"udp dst port 4789", udp4(1, 4789), true},
		// Service names match the protocols /etc/services lists them
		// for, as in libpcap.
		{"port http", tcp4(1, 80), true},
		{"port http", udp4(1, 80), false},
		{"port domain", udp4(1, 53), true},
		{"portrange http-https", udp4(1, 100), true},
		// Port ranges are decimal, as libpcap reads them.
		{"portrange 010-020", udp4(1, 15), true},
		{"portrange 010-020", udp4(1, 9), false},
		// libpcap drops the protocol check of a load on the right of an
		// arithmetic operator: this matches an ARP frame.
		{"len - ip[0] > 0", arp, true},
		{"ip[0] - len > 0", arp, false},
		// Addresses as libpcap reads them.
		{"src host 198.018.000.001", udp4(1, 1), true},
		{"net 198.18", udp4(1, 1), true},
		{"src net 198.18.0.1 mask 255.255.0.255", udp4(1, 1), true},
		{"dst net 198.18.0.1 mask 255.255.0.255", udp4(1, 1), false},
		{"net 198.18.0.0 / 16", udp4(1, 1), true},
		{"ether host 0200.0000.0002", append([]byte{2, 0, 0, 0, 0, 2}, udp4(1, 1)[6:]...), true},
		// Bare ids take the qualifiers before them.
		{"ip proto 6 or 17", udp4(1, 1), true},
		{"port 1 or (2 or 53)", udp4(53, 1), true},
		{"ppp src 0:0:0:0:0:0 and wlan dst host 0:0:0:0:0:0", udp4(1, 1), true},
		{"link[12:2] = 0x800 and length = 42", udp4(1, 1), true},
		{"pim or vrrp", udp4(1, 1), false},
		// Constant comparisons.
		{"1 = 1", udp4(1, 1), true},
		{"udp and 2 > 1", udp4(1, 1), true},
		{"tcp or 0 = 1", udp4(1, 1), false},
		{"len >> 31 = 0", udp4(1, 1), true},
		{"len >> (len - len) = 42", udp4(1, 1), true},
		{"len + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] + ip[0] = 42 + 19 * 0x45", udp4(1, 1), true},
		{"udp dst port 4789", udp4(4789, 1), false},
		{"port 53 or 80", udp4(80, 1), true},
		{"udp and not src net 198.18.0.0/24", udp4(1, 1), false},
		{"udp and not src net 198.18.1.0/24", udp4(1, 1), true},
		{"portrange 100-200", udp4(150, 1), true},
		{"host 198.18.1.2 and len = 42", udp4(1, 1), true},
		{"tcp or udp and ip[8] = 0", udp4(1, 1), true},
		{"udp or tcp and ip[8] = 1", udp4(1, 1), false}, // (udp or tcp) and ...
		{"ip6 or arp", udp4(1, 1), false},
		{"", udp4(1, 1), true},
	} {
		prog, err := Compile(tc.expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.expr, err)
		}
		vm, err := bpf.NewVM(prog)
		if err != nil {
			t.Fatalf("Compile(%q): VM: %v", tc.expr, err)
		}
		n, err := vm.Run(tc.frame)
		if err != nil || (n != 0) != tc.want {
			t.Errorf("%q: got %d, %v; want match %v", tc.expr, n, err, tc.want)
		}
	}
}

// TestCompileLong: conditional jumps farther than 255 instructions go
// through unconditional ones.
func TestCompileLong(t *testing.T) {
	var parts []string
	for i := 0; i < 60; i++ {
		parts = append(parts, fmt.Sprintf("host 198.18.%d.%d", i/8, i))
	}
	prog, err := Compile(strings.Join(parts, " or "))
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) < 600 {
		t.Fatalf("only %d instructions", len(prog))
	}
	if _, err := bpf.NewVM(prog); err != nil {
		t.Fatal(err)
	}
	if _, err := bpf.Assemble(prog); err != nil {
		t.Fatal(err)
	}
}

// FuzzCompile: any expression compiles to a valid program or gives an
// *Error with a message of bounded length; never a panic. The parser's
// work stays within workBound of the expression's length (the seeds
// include nesting past MaxDepth, which once took time quadratic in it).
func FuzzCompile(f *testing.F) {
	for _, n := range []int{MaxDepth, MaxDepth + 1, 3 * MaxDepth} {
		f.Add(strings.Repeat("(", n) + "udp" + strings.Repeat(")", n))
		f.Add(strings.Repeat("(", n) + "len = 1" + strings.Repeat(")", n))
		f.Add("port 53 or " + strings.Repeat("(", n) + "80" + strings.Repeat(")", n))
		f.Add(strings.Repeat("not ", n) + "udp")
		f.Add("len = " + strings.Repeat("-", n) + "1")
		f.Add(strings.Repeat("ip[", n) + "0" + strings.Repeat("]", n) + " = 1")
	}
	f.Fuzz(func(t *testing.T, expr string) {
		steps := 0
		_, perr := parse(expr, limits{MaxDepth, MaxLength}, &steps)
		if steps > workBound(len(expr)) {
			t.Fatalf("Compile(%.200q): %d parser steps for %d bytes", expr, steps, len(expr))
		}
		prog, err := Compile(expr)
		if (err == nil) != (perr == nil) && perr != nil {
			t.Fatalf("Compile(%.200q) = %v, but the parse failed: %v", expr, err, perr)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Compile(%.200q): %T %v", expr, err, err)
			}
			if n := len(err.Error()); n > 1000 {
				t.Fatalf("Compile(%.200q): a message of %d bytes", expr, n)
			}
			return
		}
		if _, err := bpf.NewVM(prog); err != nil {
			t.Fatalf("Compile(%.200q): invalid program: %v\n%v", expr, err, prog)
		}
		if err := Validate(prog); err != nil {
			t.Fatalf("Compile(%.200q): %v", expr, err)
		}
	})
}

// Raw instructions (tcpdump -ddd, bpf.Assemble) translate as their
// disassembly does, and the caller's slice is left alone.
func TestXDPRawInstructions(t *testing.T) {
	prog, err := Compile("udp port 53")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]bpf.Instruction, len(raw))
	for i, r := range raw {
		in[i] = r
	}
	a, err := XDP(in, "m", "n")
	if err != nil {
		t.Fatal(err)
	}
	b, err := XDP(prog, "m", "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Errorf("raw: %d eBPF instructions, disassembled: %d", len(a), len(b))
	}
	if _, ok := in[0].(bpf.RawInstruction); !ok {
		t.Errorf("XDP rewrote the caller's program: %T", in[0])
	}
}
