package conductor

import "context"

// Remote is a server visor does not own (an --endpoint, or the engine a `visor serve` process runs): it is never
// stopped or restarted by this process.
type Remote struct{ Addr string }

// URL implements Process.
func (r Remote) URL() string { return r.Addr }

// Done never closes: visor cannot see a remote server exit.
func (r Remote) Done() <-chan struct{} { return nil }

// Err implements Process.
func (r Remote) Err() error { return nil }

// Stop does nothing: the server is not visor's to stop.
func (r Remote) Stop(context.Context) error { return nil }

// Owned reports false: Recover must not restart it.
func (r Remote) Owned() bool { return false }
