// Package nsdo runs a function inside another network namespace, on a
// locked OS thread, and brings the thread back. Sockets, BPF links and
// netlink handles the function creates belong to that namespace and may be
// used from any goroutine afterwards; goroutines it starts do not inherit
// the namespace. Off Linux, DoNamed returns an error.
package nsdo
