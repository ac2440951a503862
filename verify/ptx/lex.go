package ptx

import "fmt"

type tokKind uint8

const (
	tkEOF   tokKind = iota
	tkIdent         // names, directives (.reg), opcodes (ld.global.f32), registers (%r1, %tid.x)
	tkNum           // 12, 0x1f, 0f3F800000, 1.5
	tkPunct         // ; , { } [ ] ( ) < > + - @ ! : |
)

type token struct {
	kind tokKind
	s    string
	line int
	col  int
	off  int // byte offset in the source
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$' || c == '%' || c == '.'
}

func isIdentChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c == '.'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// lex splits PTX source into tokens. Comments (// and /* */) are dropped.
func lex(src string) ([]token, *Error) {
	var toks []token
	line, lineStart := 1, 0
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
			lineStart = i
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			startLine, startCol := line, i-lineStart+1
			i += 2
			for {
				if i+1 >= len(src) {
					return nil, &Error{Line: startLine, Col: startCol, Msg: "unterminated /* comment"}
				}
				if src[i] == '*' && src[i+1] == '/' {
					i += 2
					break
				}
				if src[i] == '\n' {
					line++
					lineStart = i + 1
				}
				i++
			}
			continue
		}
		t := token{line: line, col: i - lineStart + 1, off: i}
		start := i
		switch {
		case isIdentStart(c):
			i++
			for i < len(src) {
				if isIdentChar(src[i]) {
					i++
				} else if src[i] == ':' && i+1 < len(src) && src[i+1] == ':' {
					i += 2 // .L2::128B
				} else {
					break
				}
			}
			t.kind = tkIdent
		case isDigit(c):
			i++
			for i < len(src) {
				d := src[i]
				if isIdentChar(d) {
					i++
				} else if (d == '-' || d == '+') && (src[i-1] == 'e' || src[i-1] == 'E') && !isHexish(src[start:i]) {
					i++
				} else {
					break
				}
			}
			t.kind = tkNum
		default:
			switch c {
			case ';', ',', '{', '}', '[', ']', '(', ')', '<', '>', '+', '-', '@', '!', ':', '|', '=':
				i++
				t.kind = tkPunct
			default:
				return nil, &Error{Line: line, Col: i - lineStart + 1, Msg: fmt.Sprintf("unexpected character %q", c)}
			}
		}
		t.s = src[start:i]
		toks = append(toks, t)
	}
	toks = append(toks, token{kind: tkEOF, line: line, col: i - lineStart + 1, off: len(src)})
	return toks, nil
}

// isHexish reports whether a number prefix is a hex or hex-float literal, in
// which e/E are digits rather than exponent markers.
func isHexish(s string) bool {
	return len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X' || s[1] == 'f' || s[1] == 'F' || s[1] == 'd' || s[1] == 'D')
}
