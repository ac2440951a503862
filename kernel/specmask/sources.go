package specmask

import "embed"

// Sources holds this package's files; attngen copies them into every
// generated package.
//
//go:embed specmask.go
var Sources embed.FS
