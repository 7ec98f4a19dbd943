module github.com/xdpio/xdpio/contrib/quic

go 1.26.3

require (
	github.com/quic-go/quic-go v0.65.0
	github.com/xdpio/xdpio v0.0.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/mdlayher/genetlink v1.4.0 // indirect
	github.com/mdlayher/netlink v1.11.2 // indirect
	github.com/mdlayher/socket v0.6.0 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
)

replace github.com/xdpio/xdpio => ../..
