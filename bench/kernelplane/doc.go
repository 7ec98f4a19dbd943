// Package kernelplane is xdpio bench's kernel data plane: each endpoint
// is a kernel UDP socket, read and written in batches with recvmmsg and
// sendmmsg (a plane.DataPlane); and a TCP test's data connections on the
// kernel's TCP, with their TCP_INFO figures (TCPConn). It is the baseline the AF_XDP planes
// (xskplane, asavieplane) are measured against, and what a bench client
// or server uses when given no data plane.
package kernelplane
