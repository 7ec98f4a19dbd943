package link_test

import (
	"fmt"
	"net/netip"

	"github.com/xdpio/xdpio/bench/internal/link"
	"github.com/xdpio/xdpio/bench/plane"
)

// A stream's inbox hands out what was pushed to it, in order.
func ExampleInbox() {
	var ib link.Inbox
	src := netip.MustParseAddrPort("198.18.0.1:40000")
	ib.Push(src, []byte("one"))
	ib.Push(src, []byte("two"))
	msgs := []plane.Message{{Buf: make([]byte, 16)}, {Buf: make([]byte, 16)}, {Buf: make([]byte, 16)}}
	n := ib.Pop(msgs)
	for _, m := range msgs[:n] {
		fmt.Println(m.Addr, string(m.Buf[:m.N]))
	}
	fmt.Println(ib.Len(), "left")
	// Output:
	// 198.18.0.1:40000 one
	// 198.18.0.1:40000 two
	// 0 left
}
