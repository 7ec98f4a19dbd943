package tcpplane_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/xdpio/xdpio/bench/kernelplane"
	"github.com/xdpio/xdpio/bench/tcpplane"
)

// A write of TCP mode is whole segments that one super-packet (a 16-bit
// IP length) holds: 44 of 1460 bytes over IPv4, 45 of 1440 over IPv6. TCP
// mode needs the AF_XDP data plane: kernel sockets cannot carry it.
func Example() {
	for _, v6 := range []bool{false, true} {
		mss := 1460
		if v6 {
			mss = 1440
		}
		w := tcpplane.MaxWrite(v6, mss)
		fmt.Println("v6", v6, "write", w, "segments", w/mss)
	}
	cfg := tcpplane.SenderConfig{Server: netip.MustParseAddrPort("198.18.0.2:5202"), Streams: 1, MSS: 1460, Write: 64240}
	_, err := tcpplane.OpenSender(&kernelplane.DataPlane{}, cfg)
	fmt.Println("over kernel sockets: unsupported", errors.Is(err, errors.ErrUnsupported))
	// Output:
	// v6 false write 64240 segments 44
	// v6 true write 64800 segments 45
	// over kernel sockets: unsupported true
}
