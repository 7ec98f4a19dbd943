package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/xdpio/xdpio/nic"
)

// plainError is an error whose text is said in the user's words; it
// wraps the original, so exit statuses and errors.Is still see it.
type plainError struct {
	text string
	err  error
}

func (e *plainError) Error() string { return e.text }
func (e *plainError) Unwrap() error { return e.err }

// inUserWords rewrites the parts of err's text that speak the kernel's
// language (ethtool netlink message and attribute names, errno names)
// into what a user of ethtool would read.
func inUserWords(err error) error {
	var ee *nic.RequestError
	if err == nil || !errors.As(err, &ee) {
		return err
	}
	switch ee.Family {
	case "ethtool":
		text := strings.Replace(err.Error(), ee.Error(), ethtoolText(ee), 1)
		return &plainError{text, err}
	case "netdev":
		// The request names the device by ifindex: say its name, from
		// the nic.Error around it, in place of that error's "nic DEV:
		// op:" when nothing stands between the two.
		var ne *nic.Error
		if !errors.As(err, &ne) {
			return err
		}
		text := strings.Replace(err.Error(), ee.Error(), netdevText(ee), 1)
		if ne.Err == error(ee) {
			text = strings.Replace(err.Error(), ne.Error(), ne.Device+": "+netdevText(ee), 1)
		}
		return &plainError{text, err}
	}
	return err
}

// netdevWhat says what each netdev operation reads or sets.
var netdevWhat = map[string]string{
	"dev-get":    "XDP features (netdev dev-get)",
	"queue-get":  "queue information (netdev queue-get)",
	"napi-get":   "NAPI information (netdev napi-get)",
	"napi-set":   "NAPI settings (netdev napi-set)",
	"qstats-get": "per-queue statistics (netdev qstats)",
}

// netdevText says what a netdev request's failure means, without the
// request's ifindex, attribute and errno names.
func netdevText(e *nic.RequestError) string {
	what, ok := netdevWhat[e.Op]
	if !ok {
		what = "netdev " + e.Op
	}
	switch {
	case errors.Is(e.Err, syscall.EPERM) || errors.Is(e.Err, syscall.EACCES):
		return what + " need root (CAP_NET_ADMIN): permission denied"
	case e.NotSupported && strings.HasPrefix(e.Missing, "the device's driver"):
		return what + " are not supported by the driver"
	case e.NotSupported:
		return what + " are not supported: " + e.Missing
	}
	var b strings.Builder
	b.WriteString(what + " failed")
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Attr != "" {
		b.WriteString(" (" + e.Attr + ")")
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// noDeviceWords says where to look when the device named on the command
// line is not in the namespace the command ran in (netns, "" for the
// process's own).
func noDeviceWords(err error, netns string) error {
	var ne *nic.Error
	if err == nil || !errors.Is(err, nic.ErrNoDevice) || !errors.As(err, &ne) {
		return err
	}
	text := fmt.Sprintf("no network interface %q in this network namespace (see ip link; --netns NS runs the command in another)", ne.Device)
	if netns != "" {
		text = fmt.Sprintf("no network interface %q in network namespace %q (see ip -n %s link)", ne.Device, netns, netns)
	}
	return &plainError{text, err}
}

// ethtoolText says what an ethtool request's failure means.
func ethtoolText(e *nic.RequestError) string {
	dev := e.Target
	what := opWords(e.Op)
	var b strings.Builder
	b.WriteString(dev)
	b.WriteString(": ")
	switch {
	case errors.Is(e.Err, syscall.ENODEV):
		b.WriteString("no such network device")
		return b.String()
	case errors.Is(e.Err, syscall.EPERM) || errors.Is(e.Err, syscall.EACCES):
		b.WriteString(what + " needs root (CAP_NET_ADMIN): permission denied")
		return b.String()
	case e.NotSupported && (strings.HasPrefix(e.Missing, "the driver of") || strings.Contains(e.Missing, "by the driver of")):
		// The driver has none of it: say what, not which request found
		// out (`coalesce set` reads first, to show before → after).
		if lacks, ok := driverLacks[msgGroup(e.Op)]; ok {
			b.WriteString(lacks + " not supported by the driver")
			return b.String()
		}
		b.WriteString(what + " is not supported by the driver")
		return b.String()
	case e.NotSupported:
		b.WriteString(what + " is not supported by the driver")
		if e.Missing != "" {
			b.WriteString(" (" + attrWords(e.Missing) + ")")
		}
		return b.String()
	}
	b.WriteString(what + " failed")
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Attr != "" {
		b.WriteString(" (" + attrWords(e.Attr) + ")")
	}
	if e.Err != nil {
		var en syscall.Errno
		if errors.As(e.Err, &en) {
			b.WriteString(": " + en.Error())
		} else {
			b.WriteString(": " + e.Err.Error())
		}
	}
	return b.String()
}

// driverLacks says, per ethtool message group, what a driver without
// the group's messages lacks, to go before "not supported by the
// driver".
var driverLacks = map[string]string{
	"COALESCE": "interrupt coalescing (ethtool -c/-C) is",
	"RINGS":    "ring parameters (ethtool -g/-G) are",
	"CHANNELS": "channel counts (ethtool -l/-L) are",
	"PAUSE":    "pause frames (ethtool -a/-A) are",
	"RSS":      "RSS (ethtool -x/-X) is",
	"PERQUEUE": "per-queue interrupt coalescing (ethtool -Q … --coalesce) is",
}

// msgGroup is an ethtool message name without its verb: COALESCE for
// ETHTOOL_MSG_COALESCE_GET.
func msgGroup(op string) string {
	op = strings.TrimPrefix(op, "ETHTOOL_MSG_")
	if i := strings.LastIndexByte(op, '_'); i >= 0 {
		return op[:i]
	}
	return op
}

// opWords turns an ethtool message name (CHANNELS_SET) into words
// ("setting channels").
func opWords(op string) string {
	op = strings.TrimPrefix(op, "ETHTOOL_MSG_")
	i := strings.LastIndexByte(op, '_')
	if i < 0 {
		return strings.ToLower(op) + " (ethtool " + op + ")"
	}
	verb, obj := strings.ToLower(op[i+1:]), strings.ToLower(strings.ReplaceAll(op[:i], "_", " "))
	switch verb {
	case "get":
		verb = "reading"
	case "set":
		verb = "setting"
	case "act":
		verb = "running"
	}
	return verb + " " + obj
}

// attrWords turns attribute names (ETHTOOL_A_CHANNELS_HEADER.ETHTOOL_A_HEADER_DEV_NAME,
// ETHTOOL_A_COALESCE_RX_USECS_IRQ) in s into ethtool's setting names
// (dev-name, rx-usecs-irq).
func attrWords(s string) string {
	words := strings.Fields(s)
	for i, w := range words {
		if !strings.HasPrefix(w, "ETHTOOL_") {
			continue
		}
		if j := strings.LastIndexByte(w, '.'); j >= 0 {
			w = w[j+1:]
		}
		w = strings.TrimPrefix(w, "ETHTOOL_A_")
		w = strings.TrimPrefix(w, "ETHTOOL_MSG_")
		for _, group := range []string{"HEADER_", "CHANNELS_", "COALESCE_", "RINGS_", "FEATURES_", "RSS_", "LINKINFO_", "PAUSE_"} {
			if strings.HasPrefix(w, group) {
				w = strings.TrimPrefix(w, group)
				break
			}
		}
		w = strings.TrimSuffix(w, "_COUNT")
		words[i] = strings.ToLower(strings.ReplaceAll(w, "_", "-"))
	}
	return strings.Join(words, " ")
}
