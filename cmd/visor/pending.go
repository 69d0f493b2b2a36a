package main

import (
	"context"
	"errors"
	"io"
)

var errPending = errors.New("not built yet")

func cmdPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error { return errPending }
