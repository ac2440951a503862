package main

import (
	"errors"
	"io"
)

func cmdReach(args []string, stdout, stderr io.Writer) error { return errors.New("not yet") }
