package kernelplane_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/xdpio/xdpio/bench/kernelplane"
	"github.com/xdpio/xdpio/bench/plane"
)

// A batch of datagrams from one endpoint to another on loopback.
func ExampleDataPlane() {
	var dp kernelplane.DataPlane
	rx, err := dp.Listen(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rx.Close()
	tx, err := dp.Dial(rx.LocalAddr())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Close()
	out := []plane.Message{{Buf: []byte("one"), N: 3}, {Buf: []byte("two"), N: 3}}
	if _, err := tx.WriteBatch(out); err != nil {
		fmt.Println(err)
		return
	}
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	in := []plane.Message{{Buf: make([]byte, 64)}, {Buf: make([]byte, 64)}}
	for got := 0; got < 2; {
		n, err := rx.ReadBatch(in[got:])
		if err != nil {
			fmt.Println(err)
			return
		}
		got += n
	}
	for _, m := range in {
		fmt.Println(string(m.Buf[:m.N]), m.Addr == tx.LocalAddr())
	}
	// Output:
	// one true
	// two true
}
