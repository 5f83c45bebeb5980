package audit

import (
	"context"

	"github.com/stockbench/stockbench/inventory"
)

// AckBatch is how many acknowledgements the auditor checks at a time: the
// order rows and Redis records it reads for them are all it holds, so an
// audit's memory does not grow with the length of the run.
const AckBatch = 4096

// AckSource yields a run's acknowledgements in batches (at most AckBatch
// each, in the order they were given). fn must not keep the batch after it
// returns: a source may reuse it. An error from fn stops the walk and is
// returned. Implementations say whether they are safe for concurrent use.
type AckSource interface {
	EachAck(ctx context.Context, fn func(batch []inventory.Ack) error) error
}

// AckSlice is an AckSource over acknowledgements held in memory. Safe for
// concurrent use as long as nobody writes to the slice.
type AckSlice []inventory.Ack

// EachAck calls fn with consecutive slices of at most AckBatch acks.
func (s AckSlice) EachAck(ctx context.Context, fn func(batch []inventory.Ack) error) error {
	for start := 0; start < len(s); start += AckBatch {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(s[start:min(start+AckBatch, len(s))]); err != nil {
			return err
		}
	}
	return nil
}

// Len is how many acknowledgements the slice holds (for progress).
func (s AckSlice) Len() int { return len(s) }
