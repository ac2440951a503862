package main

import (
	"errors"
	"io"
)

func cmdShow(args []string, stdout, stderr io.Writer) error  { return errors.New("not yet") }
func cmdReach(args []string, stdout, stderr io.Writer) error { return errors.New("not yet") }
