// Package bench is xdpio's iperf-like benchmark engine. It speaks iperf3's
// protocol (3.12, Debian bookworm's), so either end can be a real iperf3.
//
// A test has a control connection over the kernel's TCP and, in UDP mode,
// one datagram stream per parallel flow:
//
//	client → server  cookie (37 bytes: 36 characters and a NUL)
//	server → client  PARAM_EXCHANGE; client → server the Params JSON
//	server → client  CREATE_STREAMS; per stream the client sends a 4-byte
//	                 setup datagram and the server replies with another
//	server → client  TEST_START, TEST_RUNNING; datagrams flow (each starts
//	                 with a UDPHeader: send time and sequence number)
//	client → server  TEST_END
//	server → client  EXCHANGE_RESULTS; Results JSON both ways, client first
//	server → client  DISPLAY_RESULTS; client → server IPERF_DONE
//
// A state is one signed byte; a JSON message is a 4-byte big-endian length
// and the text.
//
// Server answers iperf3 clients (and Client); Client drives an iperf3
// server (or Server). Both move datagrams through a DataPlane:
// SocketDataPlane uses kernel UDP sockets with recvmmsg/sendmmsg batches;
// an AF_XDP data plane implements the same PacketConn interface. The
// receiving end computes loss, reordering and jitter as iperf3 does
// (RecvStats), and both ends produce a Report close to iperf3's -J output
// with per-interval figures, printable as text with Report.WriteText.
//
// Not yet: TCP mode, bidirectional tests, omitted seconds (-O), byte or
// block counts instead of a time, CPU accounting.
package bench
