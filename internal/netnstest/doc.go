// Package netnstest builds throwaway test hosts for integration tests that
// need a real kernel network: two fresh network namespaces joined by a veth
// pair with N queues, addressed on 198.18.0.0/24 and 2001:db8::/64, with
// static neighbour entries both ways and loopback up. The network itself is
// package vethpair's (which has no testing import, for the demo and the
// tools); this package ties it to a testing.TB.
//
// Everything New creates is removed in tb.Cleanup, also when the test fails
// or panics. Namespace names carry the process ID, so parallel tests and
// parallel test binaries never collide, and namespaces left behind by a
// process that was killed are swept by the next New.
//
// Tests that need root call RequirePriv first. It skips with a clear message
// when the process lacks privilege, unless XDPIO_REQUIRE_PRIV=1 is set (CI
// sets it), in which case the skip becomes a failure.
//
//	func TestSomething(t *testing.T) {
//		pair := netnstest.New(t, netnstest.Config{Queues: 4})
//		err := pair.A.Do(func() error {
//			// runs on a locked OS thread inside namespace A
//			return nil
//		})
//		...
//	}
package netnstest
