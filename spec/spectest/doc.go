// Package spectest owns random mask generation for property tests shared by
// several packages.
package spectest
