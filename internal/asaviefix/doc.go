// Package asaviefix works around a resource leak in github.com/asavie/xdp
// v0.3.3, the Go AF_XDP library xdpio's benchmarks compare against.
//
// asavie's Socket.Close closes the socket's file descriptor and unmaps the
// UMEM, but never unmaps the four rings (fill, completion, RX, TX) it
// mapped from the socket. Those mappings hold a reference to the socket,
// so the kernel keeps it alive and bound to its (interface, queue) until
// the process exits: the next socket on that queue fails to bind with
// EBUSY, and the interface cannot be given to another backend in the same
// process. Close closes an asavie socket and then unmaps what asavie left
// behind, found in /proc/self/maps by the socket's inode.
//
// Use it instead of Socket.Close:
//
//	s, err := xdp.NewSocket(ifindex, queue, nil)
//	...
//	defer asaviefix.Close(s)
//
// asavie.NewSocket has the same leak when it fails after mapping the rings
// (a bind that meets EBUSY while the kernel still releases the queue's
// previous socket, most often), and then the UMEM's pages stay pinned too:
// NewSocket is asavie.NewSocket that unmaps what a failed call left behind.
//
// After Close no method of the socket may be called: the ring indices it
// would read are unmapped (asavie's own Close leaves them dangling too,
// but still mapped).
package asaviefix
