package link

import (
	"net/netip"
	"testing"

	"github.com/xdpio/xdpio/bench/plane"
)

// TestInbox: datagrams come out in order with their payload and source,
// buffers are reused (no allocation per datagram once warm), and beyond
// the limit datagrams are counted as dropped, not queued.
func TestInbox(t *testing.T) {
	var ib Inbox
	src := netip.MustParseAddrPort("198.18.0.2:5201")
	msgs := make([]plane.Message, 3)
	for i := range msgs {
		msgs[i].Buf = make([]byte, 64)
	}
	for i := 0; i < 5; i++ {
		ib.Push(src, []byte{byte(i), byte(i)})
	}
	got := []byte{}
	for ib.Len() > 0 {
		n := ib.Pop(msgs)
		for _, m := range msgs[:n] {
			if m.N != 2 || m.Addr != src {
				t.Fatalf("message %+v", m)
			}
			got = append(got, m.Buf[0])
		}
	}
	if string(got) != "\x00\x01\x02\x03\x04" {
		t.Errorf("order %v", got)
	}
	allocs := testing.AllocsPerRun(100, func() {
		for i := 0; i < 3; i++ {
			ib.Push(src, []byte("warm"))
		}
		ib.Pop(msgs)
	})
	if allocs > 0 {
		t.Errorf("%.1f allocations per 3 datagrams once warm, want 0", allocs)
	}
	for i := 0; i < inboxLimit+10; i++ {
		ib.Push(src, []byte("x"))
	}
	if ib.Len() != inboxLimit || ib.Dropped != 10 {
		t.Errorf("queued %d, dropped %d; want %d and 10", ib.Len(), ib.Dropped, inboxLimit)
	}
}
