// Package link holds what bench's data planes share: running their setup
// through a Do hook (Run), looking an interface up (InterfaceByName), and
// the per-stream queue (Inbox) of the AF_XDP planes, whose client streams
// share one set of sockets.
package link
