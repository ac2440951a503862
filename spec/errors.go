package spec

import (
	"fmt"
	"sort"
	"strings"
)

// Pos is a place in a spec file; Line and Col are 1-based.
type Pos struct {
	File      string
	Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Error is one problem in a spec file.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// ErrorList is every problem found in one file, in file order. Parse returns
// it as its error.
type ErrorList []*Error

func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for k, e := range l {
		s[k] = e.Error()
	}
	return strings.Join(s, "\n")
}

func (l ErrorList) sorted() ErrorList {
	sort.SliceStable(l, func(a, b int) bool {
		if l[a].Pos.Line != l[b].Pos.Line {
			return l[a].Pos.Line < l[b].Pos.Line
		}
		return l[a].Pos.Col < l[b].Pos.Col
	})
	return l
}
