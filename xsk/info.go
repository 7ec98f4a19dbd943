package xsk

import (
	"strconv"
	"strings"
)

// Info says how a device's sockets are bound, the way a program prints it
// when it is ready: "vb, queues 0-3, copy mode, driver attach".
type Info struct {
	// Interface is the interface's name.
	Interface string `json:"interface"`
	// Queues are the RX queues with an AF_XDP socket, in order.
	Queues []int `json:"queues"`
	// ZeroCopy is set when the kernel granted every socket zero-copy
	// (BindMode; veth never does).
	ZeroCopy bool `json:"zero_copy"`
	// Attach is where the XDP program runs: AttachDriver or AttachGeneric
	// (the zero value, AttachAuto, when there is no program).
	Attach AttachMode `json:"attach"`
}

// String formats the info: "vb, queues 0-3, copy mode, driver attach".
func (in Info) String() string {
	mode := "copy"
	if in.ZeroCopy {
		mode = "zero-copy"
	}
	return in.Interface + ", queues " + FormatQueues(in.Queues) + ", " + mode + " mode, " + in.Attach.String() + " attach"
}

// FormatQueues names queue numbers the way a queue list is written on a
// command line, runs of consecutive numbers as ranges: "3", "0-3",
// "0,2,5-7", and "none" for none.
func FormatQueues(queues []int) string {
	var b strings.Builder
	for i := 0; i < len(queues); {
		j := i
		for j+1 < len(queues) && queues[j+1] == queues[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(queues[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(queues[j]))
		}
		i = j + 1
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// Info says how d's sockets are bound: its interface, queues, zero-copy
// or copy mode, and where its XDP program runs.
func (d *Device) Info() Info {
	in := Info{Interface: d.name, ZeroCopy: len(d.sockets) > 0}
	for _, s := range d.sockets {
		in.Queues = append(in.Queues, s.Queue())
		in.ZeroCopy = in.ZeroCopy && s.ZeroCopy()
	}
	if d.prog != nil {
		in.Attach = d.prog.Mode()
	}
	return in
}
