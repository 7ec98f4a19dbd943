package filter

import (
	"errors"
	"fmt"
)

// ErrUnsupportedConstruct is wrapped by every *Error about a construct this
// compiler does not implement (as opposed to a malformed expression), and
// about an expression longer than MaxLength or nested deeper than
// MaxDepth.
var ErrUnsupportedConstruct = errors.New("unsupported construct")

// Error is a failure to compile an expression. It names the offending
// construct and where it starts.
type Error struct {
	// Expr is the whole expression.
	Expr string
	// Pos is the byte offset in Expr where the construct starts.
	Pos int
	// Construct is the offending word or operator ("protochain", "gateway",
	// ...), empty at the end of the expression and for what is wrong
	// with the expression as a whole (its length, a filter that rejects
	// every packet).
	Construct string
	// Msg says what is wrong.
	Msg string
	// Unsupported is set when the construct is valid tcpdump syntax that
	// this compiler does not implement: the expression is refused rather
	// than compiled into something that matches more or less than tcpdump
	// would.
	Unsupported bool
}

// Error names the construct, its offset and the reason. A long
// expression is shown by its length and the text around the offset.
func (e *Error) Error() string {
	what := "syntax error"
	if e.Unsupported {
		what = "unsupported construct"
	}
	expr := fmt.Sprintf("%q", e.Expr)
	if len(e.Expr) > maxShown {
		lo, hi := max(0, e.Pos-maxShown/4), min(len(e.Expr), e.Pos+maxShown/4)
		expr = fmt.Sprintf("of %d bytes (offset %d: %q)", len(e.Expr), lo, e.Expr[lo:hi])
	}
	switch {
	case e.Construct != "":
		return fmt.Sprintf("filter %s: %s %q at offset %d: %s", expr, what, short(e.Construct), e.Pos, e.Msg)
	case e.Pos >= len(e.Expr):
		return fmt.Sprintf("filter %s: %s at end of expression: %s", expr, what, e.Msg)
	}
	return fmt.Sprintf("filter %s: %s: %s", expr, what, e.Msg)
}

// maxShown is the longest expression an error quotes whole.
const maxShown = 200

// Is reports whether target is ErrUnsupportedConstruct and e is about an
// unsupported construct.
func (e *Error) Is(target error) bool { return e.Unsupported && target == ErrUnsupportedConstruct }
