package filter

import (
	"strings"
	"unicode/utf8"
)

type tokKind int

const (
	tEOF tokKind = iota
	tWord
	tOp
)

type token struct {
	kind tokKind
	s    string // the word, or the one libpcap takes it for (link: ether)
	pos  int
	orig string // the word as written, when s differs
}

// text is the token as written.
func (t token) text() string {
	if t.orig != "" {
		return t.orig
	}
	return t.s
}

// synonyms are words libpcap's scanner reads as another: on Ethernet,
// link, ppp, slip, fddi, tr and wlan all mean ether.
var synonyms = map[string]string{
	"link": "ether", "ppp": "ether", "slip": "ether", "fddi": "ether", "tr": "ether", "wlan": "ether",
	"length": "len",
}

// lex splits an expression into words (keywords, numbers, addresses,
// ranges, names) and operators. Inside brackets ':' and '-' separate
// tokens, as in ip[6:2] and tcp[13]-1; outside, they belong to addresses
// and ranges (2001:db8::1, 1-1024) and to names (tcp-syn).
func lex(s string) ([]token, error) {
	var toks []token
	depth := 0
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case isWordStart(c) || c == ':' && depth == 0:
			start := i
			i++
			digit := c >= '0' && c <= '9' || c == ':'
			for i < len(s) {
				c := s[i]
				if isAlnum(c) || c == '.' || c == '_' {
					i++
					continue
				}
				if depth == 0 && (c == ':' || c == '/') && (digit || isHexWord(s[start:i]) || strings.Contains(s[start:i], ":")) {
					i++
					continue
				}
				if c == '-' && i+1 < len(s) && isAlnum(s[i+1]) && (!digit || depth == 0) {
					i++
					continue
				}
				break
			}
			w := token{kind: tWord, s: s[start:i], pos: start}
			if syn, ok := synonyms[w.s]; ok {
				w.s, w.orig = syn, w.s
			}
			toks = append(toks, w)
			continue
		}
		op := ""
		for _, o := range []string{"<<", ">>", "<=", ">=", "==", "!=", "&&", "||"} {
			if strings.HasPrefix(s[i:], o) {
				op = o
				break
			}
		}
		if op == "" {
			if !strings.ContainsRune("()[]:+-*/%^&|<>=!", rune(c)) {
				_, size := utf8.DecodeRuneInString(s[i:])
				return nil, &Error{Expr: s, Pos: i, Construct: s[i : i+size], Msg: "unexpected character"}
			}
			op = s[i : i+1]
		}
		switch op {
		case "[":
			depth++
		case "]":
			depth--
		}
		toks = append(toks, token{kind: tOp, s: op, pos: i})
		i += len(op)
	}
	toks = append(toks, token{kind: tEOF, pos: len(s)})
	return toks, nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isWordStart(c byte) bool { return isAlnum(c) || c == '\\' || c == '_' }

// isHexWord: a word that could be the start of a MAC or IPv6 address.
func isHexWord(w string) bool {
	if w == "" || len(w) > 4 {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
