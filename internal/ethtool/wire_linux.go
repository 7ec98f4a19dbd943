//go:build linux

package ethtool

import "github.com/xdpio/xdpio/internal/genl"

// newDecoder is genl.NewDecoder: replies are decoded only once they
// are checked to be whole attributes.
var newDecoder = genl.NewDecoder
