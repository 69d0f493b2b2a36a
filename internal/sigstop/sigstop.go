// Package sigstop is how visor stops on Ctrl-C and SIGTERM: cleanly first, at once when that takes too long or
// a second signal comes.
package sigstop

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// OnSignal cancels the context on the first Ctrl-C or SIGTERM, so a turn ends cleanly and is stored; a second
// signal, or a clean stop that takes longer than 20 seconds, ends the process at once: nothing may leave visor
// unkillable. (20 s lets a clean stop finish killing a llama-server that ignored SIGTERM, after its 10 s.)
func OnSignal() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		cancel()
		select {
		case <-sigs:
			fmt.Fprintln(os.Stderr, "visor: stopped at once (second signal)")
		case <-time.After(20 * time.Second):
			fmt.Fprintln(os.Stderr, "visor: still stopping after 20 s; exiting now")
		}
		os.Exit(130)
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}
