package iperf3

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// State is a one-byte message of the iperf3 control protocol: the sender
// announces the state the test moves to. The values are iperf3's
// (iperf_api.h) and go on the wire as a signed byte.
type State int8

// iperf3 control states.
const (
	TestStart       State = 1
	TestRunning     State = 2
	TestEnd         State = 4
	ParamExchange   State = 9
	CreateStreams   State = 10
	ServerTerminate State = 11
	ClientTerminate State = 12
	ExchangeResults State = 13
	DisplayResults  State = 14
	IperfStart      State = 15
	IperfDone       State = 16
	AccessDenied    State = -1
	ServerErrorCode State = -2
)

var stateNames = map[State]string{
	TestStart: "TEST_START", TestRunning: "TEST_RUNNING", TestEnd: "TEST_END",
	ParamExchange: "PARAM_EXCHANGE", CreateStreams: "CREATE_STREAMS",
	ServerTerminate: "SERVER_TERMINATE", ClientTerminate: "CLIENT_TERMINATE",
	ExchangeResults: "EXCHANGE_RESULTS", DisplayResults: "DISPLAY_RESULTS",
	IperfStart: "IPERF_START", IperfDone: "IPERF_DONE",
	AccessDenied: "ACCESS_DENIED", ServerErrorCode: "SERVER_ERROR",
}

// String returns iperf3's name of the state, or "STATE(n)" for an unknown one.
func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("STATE(%d)", int8(s))
}

// Known reports whether s is a state iperf3 sends.
func (s State) Known() bool {
	_, ok := stateNames[s]
	return ok
}

// Errors of the control protocol; test them with errors.Is.
var (
	// ErrProtocol: the peer sent something the iperf3 protocol does not allow here.
	ErrProtocol = errors.New("iperf3 protocol error")
	// ErrAccessDenied: the server is busy with another test (ACCESS_DENIED).
	ErrAccessDenied = errors.New("server is busy running a test (access denied)")
	// ErrClientTerminated: the client sent CLIENT_TERMINATE.
	ErrClientTerminated = errors.New("the client has terminated")
	// ErrServerTerminated: the server sent SERVER_TERMINATE.
	ErrServerTerminated = errors.New("the server has terminated")
)

// ServerError is iperf3's SERVER_ERROR message: the server's iperf error
// code (i_errno) and the system errno that goes with it.
type ServerError struct {
	Code  int32 // iperf3 i_errno, e.g. 13 (IEUNIMP), 202 (IESTREAMLISTEN)
	Errno int32 // errno, 0 if none
}

// Error gives the iperf3 error code the server sent, its meaning, and the errno.
func (e *ServerError) Error() string {
	return fmt.Sprintf("iperf3 server error: code %d (%s), errno %d", e.Code, ieText(e.Code), e.Errno)
}

// iperf3 i_errno values this package sends or names (IE and iperf3's name).
const (
	IEUnimp        = 13
	IERecvParams   = 114
	IEClientTerm   = 119
	IEProtocol     = 131
	IEStreamListen = 202
	IEStreamAccept = 204
	IEStreamWrite  = 205
	IEStreamRead   = 206
)

// LinuxEPROTONOSUPPORT is Linux's errno "Protocol not supported", sent
// with IEStreamListen when an iperf3 client asks for a TCP test: the
// client appends its strerror to the error text.
const LinuxEPROTONOSUPPORT = 93

func ieText(code int32) string {
	switch code {
	case IEUnimp:
		return "not implemented"
	case IERecvParams:
		return "unable to receive parameters from client"
	case IEClientTerm:
		return "the client has terminated"
	case IEProtocol:
		return "protocol does not exist"
	case IEStreamListen:
		return "unable to start stream listener"
	case IEStreamAccept:
		return "unable to accept stream connection"
	case IEStreamWrite:
		return "unable to write to stream socket"
	case IEStreamRead:
		return "unable to read from stream socket"
	}
	return "unknown"
}

// CookieSize is the length of iperf3's session cookie on the wire: 36
// characters and a terminating NUL.
const CookieSize = 37

const cookieChars = "abcdefghijklmnopqrstuvwxyz234567"

// Cookie identifies one test; the client sends it first on the control
// connection (and, in a TCP test, on every data connection).
type Cookie [CookieSize]byte

// NewCookie returns a random cookie made like iperf3's: 36 characters from
// a base32 alphabet and a NUL.
func NewCookie() Cookie {
	var c Cookie
	var r [CookieSize - 1]byte
	rand.Read(r[:])
	for i, b := range r {
		c[i] = cookieChars[int(b)%len(cookieChars)]
	}
	return c
}

// String returns the cookie's characters without the NUL.
func (c Cookie) String() string { return string(c[:CookieSize-1]) }

// ParseCookie checks a cookie received from the network: 36 printable
// ASCII characters followed by a NUL.
func ParseCookie(b []byte) (Cookie, error) {
	var c Cookie
	if len(b) != CookieSize {
		return c, fmt.Errorf("parse cookie: %d bytes, want %d: %w", len(b), CookieSize, ErrProtocol)
	}
	for i, ch := range b[:CookieSize-1] {
		if ch < 0x21 || ch > 0x7e {
			return c, fmt.Errorf("parse cookie: byte %d is %#x, not a printable character: %w", i, ch, ErrProtocol)
		}
	}
	if b[CookieSize-1] != 0 {
		return c, fmt.Errorf("parse cookie: last byte is %#x, want NUL: %w", b[CookieSize-1], ErrProtocol)
	}
	copy(c[:], b)
	return c, nil
}

// ReadCookie reads and checks a cookie.
func ReadCookie(r io.Reader) (Cookie, error) {
	var b [CookieSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return Cookie{}, fmt.Errorf("read cookie: %w", err)
	}
	return ParseCookie(b[:])
}

// ReadState reads one state byte.
func ReadState(r io.Reader) (State, error) {
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, fmt.Errorf("read state: %w", err)
	}
	return State(int8(b[0])), nil
}

// WriteState writes one state byte.
func WriteState(w io.Writer, s State) error {
	if _, err := w.Write([]byte{byte(s)}); err != nil {
		return fmt.Errorf("send state %v: %w", s, err)
	}
	return nil
}

// ReadServerError reads the two big-endian int32 that follow SERVER_ERROR.
func ReadServerError(r io.Reader) error {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return fmt.Errorf("read server error: %w", err)
	}
	return &ServerError{Code: int32(binary.BigEndian.Uint32(b[:4])), Errno: int32(binary.BigEndian.Uint32(b[4:]))}
}

// WriteServerError sends SERVER_ERROR and its two codes.
func WriteServerError(w io.Writer, code, errno int32) error {
	var b [9]byte
	st := ServerErrorCode
	b[0] = byte(st)
	binary.BigEndian.PutUint32(b[1:], uint32(code))
	binary.BigEndian.PutUint32(b[5:], uint32(errno))
	if _, err := w.Write(b[:]); err != nil {
		return fmt.Errorf("send server error: %w", err)
	}
	return nil
}

// MaxMessageSize bounds a JSON control message this package accepts. iperf3
// itself allocates whatever the length says; results with server output
// of a long test are the largest real messages.
const MaxMessageSize = 16 << 20

// ReadMessage reads one control message: a 4-byte big-endian length and
// that many bytes of JSON, decoded into v.
func ReadMessage(r io.Reader, v any) error {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return fmt.Errorf("read message length: %w", err)
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > MaxMessageSize {
		return fmt.Errorf("read message: length %d exceeds %d: %w", n, MaxMessageSize, ErrProtocol)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("read message of %d bytes: %w", n, err)
	}
	return DecodeMessage(b, v)
}

// DecodeMessage decodes the JSON body of a control message into v.
func DecodeMessage(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode message: %w: %w", ErrProtocol, err)
	}
	if c, ok := v.(interface{ Check() error }); ok {
		if err := c.Check(); err != nil {
			return fmt.Errorf("decode message: %w", err)
		}
	}
	return nil
}

// WriteMessage encodes v as JSON and writes it with its length prefix, in
// one write.
func WriteMessage(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	if len(body) > MaxMessageSize {
		return fmt.Errorf("encode message: %d bytes exceeds %d", len(body), MaxMessageSize)
	}
	b := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	copy(b[4:], body)
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("send message: %w", err)
	}
	return nil
}

// Params is the test description the client sends after PARAM_EXCHANGE,
// with iperf3's key names. iperf3 treats a present boolean key as true,
// so booleans are sent only when set.
type Params struct {
	TCP              bool   `json:"tcp,omitempty"`
	UDP              bool   `json:"udp,omitempty"`
	SCTP             bool   `json:"sctp,omitempty"`
	Omit             int    `json:"omit"` // seconds omitted at the start
	ServerAffinity   *int   `json:"server_affinity,omitempty"`
	Time             int    `json:"time"`       // test length in seconds
	Num              uint64 `json:"num"`        // bytes to send instead of a time (0: use time)
	Blockcount       uint64 `json:"blockcount"` // blocks to send instead of a time (0: use time)
	MSS              int    `json:"MSS,omitempty"`
	NoDelay          bool   `json:"nodelay,omitempty"`
	Parallel         int    `json:"parallel"` // number of streams
	Reverse          bool   `json:"reverse,omitempty"`
	Bidirectional    bool   `json:"bidirectional,omitempty"`
	Window           int    `json:"window,omitempty"`    // socket buffer size
	Len              int    `json:"len,omitempty"`       // datagram payload length
	Bandwidth        uint64 `json:"bandwidth,omitempty"` // bits per second per stream, 0: unlimited
	FQRate           uint64 `json:"fqrate,omitempty"`
	PacingTimer      int    `json:"pacing_timer,omitempty"`
	Burst            int    `json:"burst,omitempty"`
	TOS              int    `json:"TOS,omitempty"`
	FlowLabel        int    `json:"flowlabel,omitempty"`
	Title            string `json:"title,omitempty"`
	ExtraData        string `json:"extra_data,omitempty"`
	Congestion       string `json:"congestion,omitempty"`
	CongestionUsed   string `json:"congestion_used,omitempty"`
	GetServerOutput  int    `json:"get_server_output,omitempty"`
	UDPCounters64Bit int    `json:"udp_counters_64bit,omitempty"`
	RepeatingPayload int    `json:"repeating_payload,omitempty"`
	ZeroCopy         int    `json:"zerocopy,omitempty"`
	DontFragment     int    `json:"dont_fragment,omitempty"`
	AuthToken        string `json:"authtoken,omitempty"`
	ClientVersion    string `json:"client_version,omitempty"`
	// TailMS is sent by xdpio's client when it sends: the milliseconds
	// it waits between its last datagram and TEST_END, so that the
	// receiver reads what is still in flight. iperf3 ends a receiver's
	// window when TEST_END arrives, which its client sends as it stops:
	// an xdpio server ends it TailMS earlier, where that was. iperf3
	// ignores the key.
	TailMS int `json:"xdpio_tail_ms,omitempty"`
}

// maxTCPBlksize is iperf3's largest block (-l) of a TCP test (MAX_BLOCKSIZE).
const maxTCPBlksize = 1 << 20

// MaxTailMS is the largest Params.TailMS a server takes.
const MaxTailMS = 1000

// Check returns an ErrProtocol error for parameters no iperf3 sends (ReadMessage calls it).
func (p *Params) Check() error {
	switch {
	case p.Parallel < 0 || p.Parallel > 128:
		return fmt.Errorf("invalid parallel %d: must be 0..128: %w", p.Parallel, ErrProtocol)
	case p.Len < 0 || (p.UDP && p.Len > 65507):
		return fmt.Errorf("invalid len %d: must be 0..65507: %w", p.Len, ErrProtocol)
	case p.Len > maxTCPBlksize:
		// iperf3's TCP tests write 128 KiB blocks by default, up to 1 MiB
		// (-l); such a test is refused later, for being TCP, not here.
		return fmt.Errorf("invalid len %d: must be 0..%d: %w", p.Len, maxTCPBlksize, ErrProtocol)
	case p.Time < 0 || p.Omit < 0:
		return fmt.Errorf("invalid time %d or omit %d: %w", p.Time, p.Omit, ErrProtocol)
	case p.TailMS < 0 || p.TailMS > MaxTailMS:
		return fmt.Errorf("invalid xdpio_tail_ms %d: must be 0..%d: %w", p.TailMS, MaxTailMS, ErrProtocol)
	}
	return nil
}

// Results is the message both ends exchange after EXCHANGE_RESULTS (client
// first). iperf3 3.12 rejects it unless the cpu_util_* fields,
// sender_has_retransmits and streams are present.
type Results struct {
	CPUUtilTotal         float64         `json:"cpu_util_total"`
	CPUUtilUser          float64         `json:"cpu_util_user"`
	CPUUtilSystem        float64         `json:"cpu_util_system"`
	SenderHasRetransmits int             `json:"sender_has_retransmits"` // -1 on the receiving side
	CongestionUsed       string          `json:"congestion_used,omitempty"`
	Streams              []StreamResults `json:"streams"`
	// ServerOutputJSON is the server's own -J document, when the client asked
	// for it with get_server_output.
	ServerOutputJSON json.RawMessage `json:"server_output_json,omitempty"`
	ServerOutputText string          `json:"server_output_text,omitempty"`

	present map[string]bool
}

// StreamID returns iperf3's id of the i-th stream of a test (from 0): 1,
// 3, 4, 5… (iperf3 skips 2).
func StreamID(i int) int {
	if i == 0 {
		return 1
	}
	return i + 2
}

// StreamResults is one stream's totals in a Results message.
type StreamResults struct {
	ID          int     `json:"id"`          // 1, 3, 4, 5… as iperf3 numbers them
	Bytes       uint64  `json:"bytes"`       // sent (sender) or received (receiver)
	Retransmits int64   `json:"retransmits"` // -1 for UDP
	Jitter      float64 `json:"jitter"`      // seconds
	Errors      int64   `json:"errors"`      // datagrams lost (receiver)
	Packets     int64   `json:"packets"`     // datagrams sent, or highest sequence received
	StartTime   float64 `json:"start_time"`
	EndTime     float64 `json:"end_time"`
}

// UnmarshalJSON decodes Results and records which required keys were
// there. sender_has_retransmits -1 arrives from iperf3 as 2^64-1.
func (r *Results) UnmarshalJSON(b []byte) error {
	type plain Results
	var p struct {
		plain
		SenderHasRetransmits float64 `json:"sender_has_retransmits"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	*r = Results(p.plain)
	switch v := p.SenderHasRetransmits; {
	case v >= math.MaxInt64:
		r.SenderHasRetransmits = -1
	case v != math.Trunc(v) || v < -1 || v > 1:
		return fmt.Errorf("sender_has_retransmits %v: %w", v, ErrProtocol)
	default:
		r.SenderHasRetransmits = int(v)
	}
	r.present = map[string]bool{}
	for k := range keys {
		r.present[k] = true
	}
	return nil
}

// UnmarshalJSON decodes StreamResults and fails when one of the keys
// iperf3 requires (id, bytes, retransmits, jitter, errors, packets) is
// missing. Numbers are read as cJSON writes them (doubles); a UDP
// sender's retransmits of -1 arrives as 2^64-1 and is read back as -1.
func (s *StreamResults) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	keys := map[string]*float64{}
	for _, k := range []string{"id", "bytes", "retransmits", "jitter", "errors", "packets", "start_time", "end_time"} {
		if v, ok := raw[k]; ok {
			var f float64
			if err := json.Unmarshal(v, &f); err != nil {
				return fmt.Errorf("stream results: %s: %w", k, err)
			}
			keys[k] = &f
		}
	}
	get := func(k string, required bool) (float64, error) {
		v, ok := keys[k]
		if !ok || v == nil {
			if required {
				return 0, fmt.Errorf("stream results lack %q: %w", k, ErrProtocol)
			}
			return 0, nil
		}
		return *v, nil
	}
	var f [8]float64
	for i, k := range []string{"id", "bytes", "retransmits", "jitter", "errors", "packets", "start_time", "end_time"} {
		v, err := get(k, i < 6)
		if err != nil {
			return err
		}
		f[i] = v
	}
	if f[2] >= math.MaxInt64 {
		f[2] = -1
	}
	for i, k := range []string{"id", "bytes", "retransmits", "errors", "packets"} {
		v := f[[]int{0, 1, 2, 4, 5}[i]]
		if v != math.Trunc(v) || v < -1 || v > 1<<62 {
			return fmt.Errorf("stream results: %s %v is not a count: %w", k, v, ErrProtocol)
		}
	}
	*s = StreamResults{ID: int(f[0]), Bytes: uint64(f[1]), Retransmits: int64(f[2]), Jitter: f[3],
		Errors: int64(f[4]), Packets: int64(f[5]), StartTime: f[6], EndTime: f[7]}
	return nil
}

// Check returns an ErrProtocol error when a required key is missing or a count is negative (ReadMessage calls it).
func (r *Results) Check() error {
	for _, k := range []string{"cpu_util_total", "cpu_util_user", "cpu_util_system", "sender_has_retransmits", "streams"} {
		if !r.present[k] {
			return fmt.Errorf("results lack %q: %w", k, ErrProtocol)
		}
	}
	for _, s := range r.Streams {
		if s.Packets < 0 || s.Errors < 0 {
			return fmt.Errorf("stream %d: negative packets %d or errors %d: %w", s.ID, s.Packets, s.Errors, ErrProtocol)
		}
	}
	return nil
}
