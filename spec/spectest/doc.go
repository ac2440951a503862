// Package spectest owns random mask generation for property tests shared by
// several packages, and spec texts tests of several packages share (UnionYAML:
// a union of n primitives).
package spectest
