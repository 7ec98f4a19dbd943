// Package readme holds no code, only a test: the README's quick start is
// taken from README.md as it is, built as its own module against this
// checkout (go.mod with a replace directive, as the README tells a user
// to do), and run as root inside a test namespace against traffic from
// the kernel's UDP stack, until SIGINT. It must count every datagram and
// exit 0.
package readme
