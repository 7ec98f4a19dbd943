// Package labctl connects the hardware lab's guest tests to the lab's
// devices and to the traffic sender on the host side of the guest's
// virtio-net NIC.
//
// The lab (test/lab/run) boots a Linux kernel under qemu with a netdevsim
// device and a virtio-net NIC with RSS, and runs the `lab`-tagged tests of
// the project's packages inside it. The guest's /init names the devices in
// environment variables (EnvNetdevsim, EnvVirtio, …); Netdevsim, Virtio and
// the other helpers return them, or skip the test when they are unset (a
// normal machine), or fail it when EnvRequire is set (inside the lab, so a
// lab that silently skipped cannot pass).
//
// Traffic: the guest cannot make its own NIC receive, so a test asks the
// host for frames. Dial opens the control port (a virtio-serial port the
// guest sees as /dev/vportNpM); Client.Send sends a Request naming flows,
// and the sender (test/lab/sender, in the lab's network namespace on the
// host) writes count frames of each flow into the tap device behind the
// guest's NIC, then replies. Frame builds the frames; the sender uses it
// and so can tests that want the exact bytes.
//
// Addresses are 198.18.0.0/15 and 2001:db8::/32 only (PeerIP4, GuestIP4,
// PeerIP6, GuestIP6).
package labctl
