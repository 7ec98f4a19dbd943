//go:build linux

package genl_test

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/internal/genl"
)

// Decode a controller's reply the way the clients do.
func ExampleDecodeFamily() {
	ae := netlink.NewAttributeEncoder()
	ae.Uint16(unix.CTRL_ATTR_FAMILY_ID, 20)
	ae.String(unix.CTRL_ATTR_FAMILY_NAME, "ethtool")
	b, _ := ae.Encode()
	f, ops, err := genl.DecodeFamily(b)
	fmt.Println(f.ID, f.Name, ops == nil, err)
	// Output: 20 ethtool true <nil>
}
