package kernel

import "embed"

// Sources holds this package's files; attngen copies them (without tests
// and this file) into every generated package.
//
//go:embed *.go *.s
var Sources embed.FS
