package filter

import (
	"errors"
	"fmt"
)

// ErrUnsupported is wrapped by every *Error about a construct this
// compiler does not implement (as opposed to a malformed expression).
var ErrUnsupported = errors.New("unsupported construct")

// Error is a failure to compile an expression. It names the offending
// construct and where it starts.
type Error struct {
	// Expr is the whole expression.
	Expr string
	// Pos is the byte offset in Expr where the construct starts.
	Pos int
	// Construct is the offending word or operator ("protochain", "gateway",
	// ...), empty at the end of the expression.
	Construct string
	// Msg says what is wrong.
	Msg string
	// Unsupported is set when the construct is valid tcpdump syntax that
	// this compiler does not implement: the expression is refused rather
	// than compiled into something that matches more or less than tcpdump
	// would.
	Unsupported bool
}

// Error names the construct, its offset and the reason.
func (e *Error) Error() string {
	what := "syntax error"
	if e.Unsupported {
		what = "unsupported construct"
	}
	if e.Construct == "" {
		return fmt.Sprintf("filter %q: %s at end of expression: %s", e.Expr, what, e.Msg)
	}
	return fmt.Sprintf("filter %q: %s %q at offset %d: %s", e.Expr, what, e.Construct, e.Pos, e.Msg)
}

// Is reports whether target is ErrUnsupported and e is about an
// unsupported construct.
func (e *Error) Is(target error) bool { return e.Unsupported && target == ErrUnsupported }
