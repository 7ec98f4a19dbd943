//go:build linux

package planetest_test

import (
	"net/netip"
	"testing"

	"github.com/xdpio/xdpio/bench/internal/planetest"
	"github.com/xdpio/xdpio/bench/kernelplane"
	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// A data plane's test: listen in B, then have the per-queue readers read
// what kernel sockets in A send, and close.
func ExampleReadAllThenClose() {
	t := &testing.T{} // in a test: the test's own
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	local := netip.AddrPortFrom(pair.B.IPv4, 5301)
	dp := &kernelplane.DataPlane{Do: pair.B.Do}
	pc, err := dp.Listen(local)
	if err != nil {
		t.Fatal(err)
	}
	if mq, ok := pc.(plane.MultiQueueConn); ok {
		planetest.ReadAllThenClose(t, pc, mq.QueueReaders(), pair.A, local)
	}
}
