package engine

import "context"

// Guard runs fn, a read of an engine, unless the engine is closed (closed
// reports it) or ctx is done, and reports a failure of fn that met a Close as
// ErrClosed: the one answer a closed engine gives.
func Guard(ctx context.Context, closed func() bool, fn func() error) error {
	if closed() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := fn()
	if err != nil && closed() {
		return ErrClosed
	}
	return err
}
