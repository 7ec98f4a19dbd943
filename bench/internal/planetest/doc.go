// Package planetest holds what the tests of several data planes (the
// AF_XDP planes of xdpio and asavie/xdp) check the same way: that a conn's
// per-queue readers read every datagram in place and wake with
// net.ErrClosed when the conn closes.
package planetest
