// Package iperf3 is iperf3's control protocol (3.12, Debian bookworm's)
// and its UDP datagram header, as xdpio bench speaks them: states,
// cookie, length-prefixed JSON messages (Params, Results), SERVER_ERROR,
// the UDP stream setup messages, the header every UDP datagram starts
// with and the receiver's loss, reordering and jitter accounting
// (RecvStats). It uses the standard library only and does no I/O of its
// own beyond the reader or writer it is given.
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
// and the text. Every message ReadMessage accepts has passed its Check.
package iperf3
