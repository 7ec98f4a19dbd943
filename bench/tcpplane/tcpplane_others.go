//go:build !linux

package tcpplane

import (
	"fmt"
	"net/netip"

	"github.com/xdpio/xdpio/bench/plane"
	"github.com/xdpio/xdpio/internal/errs"
)

var errNoXSK = fmt.Errorf("TCP mode needs AF_XDP (Linux): %w", errs.ErrNotSupported)

func localMSS(plane.DataPlane, netip.Addr) (int, error) { return 0, errNoXSK }

func openSender(plane.DataPlane, SenderConfig) (Sender, error) { return nil, errNoXSK }

func openReceiver(plane.DataPlane, netip.AddrPort, uint16) (Receiver, error) { return nil, errNoXSK }
