package xsk

// Stats are a socket's counters: the kernel's XDP_STATISTICS, the library's
// own, and where every frame of the socket is right now.
type Stats struct {
	// Kernel counters (XDP_STATISTICS).
	RXDropped          uint64 // dropped for reasons other than invalid descriptors
	RXInvalidDescs     uint64 // RX descriptors the kernel found invalid
	TXInvalidDescs     uint64 // TX descriptors the kernel found invalid
	RXRingFull         uint64 // dropped because the RX ring was full
	RXFillRingEmpty    uint64 // times the fill ring was empty when a packet came
	TXRingEmptyDescs   uint64 // times the kernel found the TX ring empty
	KernelStatsPresent bool   // false if the kernel lacks XDP_STATISTICS fields

	// Library counters.
	RXFrames, RXBytes uint64 // received through Receive
	// TXFrames and TXBytes count frames the kernel finished sending: they
	// came back through the completion ring (Complete, Alloc). Frames on
	// the ring and not completed yet are FramesTX.
	TXFrames, TXBytes uint64
	// TXSubmitted and TXSubmittedBytes count frames put on the TX ring
	// (Transmit, Submit), sent or not.
	TXSubmitted, TXSubmittedBytes uint64
	Kicks                         uint64 // TX wake-up syscalls
	KickErrors                    uint64 // kicks that met a transient EAGAIN/EBUSY/ENOBUFS
	LinkDown                      uint64 // kicks refused because the link was down (ENETDOWN)
	Polls                         uint64 // blocking waits in poll
	Naps                          uint64 // RX waits that napped on a timer first (SocketConfig.RXNap, or the runner's adaptive nap)
	Wakeups                       uint64 // RX wake-up syscalls (need_wakeup, busy poll)
	BadDescs                      uint64 // descriptors from the kernel outside the UMEM, dropped
	TXRingFull                    uint64 // Transmit calls that found the TX ring full

	// Frame accounting: every frame of the socket is in exactly one place.
	FramesFree   int // in the socket's pools (RX and TX)
	FramesFill   int // given to the kernel for RX (fill ring, RX ring, in flight)
	FramesTX     int // on the TX ring or awaiting completion
	FramesApp    int // held by the application in batches
	FramesLost   int // dropped as bad descriptors
	FramesOwned  int // taken from the UMEM at creation
	ZeroCopy     bool
	NeedWakeupOn bool
}
