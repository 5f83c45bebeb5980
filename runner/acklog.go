package runner

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers"
)

// ackLog keeps a run's acknowledgements on disk, not in memory: an
// append-only file in a temporary directory of its own, written through a
// buffer as the acks are given and read back by the auditor in batches
// (audit.AckSource), so the harness's memory does not grow with the length
// of the run. A record is a state byte, then the SKU and the order id, each
// as a uvarint length and its bytes, then the quantity as a varint (a
// restock's; 0, one byte, for an order's) — a few tens of bytes an ack. Safe for
// concurrent use; the log is removed by Close.
type ackLog struct {
	mu   sync.Mutex
	dir  string
	f    *os.File
	w    *bufio.Writer
	n    int64
	err  error // first write error: every later read reports it
	buf  []byte
	done bool
}

// ackStates are the states an ack can carry, by their code on disk.
var ackStates = []inventory.OrderState{inventory.StateReserved, inventory.StateConfirmed, inventory.StateCancelled, inventory.AckRefused,
	inventory.AckRestocked, inventory.AckRestockUnknown, inventory.StateRefunded}

func ackCode(st inventory.OrderState) (byte, bool) {
	for i, s := range ackStates {
		if s == st {
			return byte(i), true
		}
	}
	return 0, false
}

// newAckLog creates the log in a new directory under the system's
// temporary directory.
func newAckLog() (*ackLog, error) {
	dir, err := servers.MkdirTemp("stockbench-acks-")
	if err != nil {
		return nil, fmt.Errorf("ack log: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "acks.bin"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("ack log: %w", err)
	}
	return &ackLog{dir: dir, f: f, w: bufio.NewWriterSize(f, 256<<10)}, nil
}

// add appends one ack. A write error is kept and reported by EachAck: the
// audit must not grade a run against acks it lost.
func (l *ackLog) add(a inventory.Ack) {
	code, ok := ackCode(a.State)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil || l.done {
		return
	}
	if !ok {
		l.err = fmt.Errorf("ack log: unknown ack state %q", a.State)
		return
	}
	b := append(l.buf[:0], code)
	b = binary.AppendUvarint(b, uint64(len(a.SKU)))
	b = append(b, a.SKU...)
	b = binary.AppendUvarint(b, uint64(len(a.OrderID)))
	b = append(b, a.OrderID...)
	b = binary.AppendVarint(b, a.Qty)
	l.buf = b
	if _, err := l.w.Write(b); err != nil {
		l.err = fmt.Errorf("ack log: %w", err)
		return
	}
	l.n++
}

// len is how many acks were logged.
func (l *ackLog) len() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// EachAck flushes what was written and reads the log from its start,
// calling fn with batches of at most audit.AckBatch acks (the slice is
// reused). Acks added while it reads may or may not be seen.
func (l *ackLog) EachAck(ctx context.Context, fn func(batch []inventory.Ack) error) error {
	l.mu.Lock()
	if l.err == nil && !l.done {
		if err := l.w.Flush(); err != nil {
			l.err = fmt.Errorf("ack log: %w", err)
		}
	}
	err, n, done := l.err, l.n, l.done
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if done {
		return errors.New("ack log: closed")
	}
	f, err := os.Open(l.f.Name())
	if err != nil {
		return fmt.Errorf("ack log: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 256<<10)
	batch := make([]inventory.Ack, 0, audit.AckBatch)
	for read := int64(0); read < n; read++ {
		a, err := readAck(r)
		if err != nil {
			return fmt.Errorf("ack log: record %d of %d: %w", read+1, n, err)
		}
		batch = append(batch, a)
		if len(batch) == cap(batch) {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		return fn(batch)
	}
	return nil
}

func readAck(r *bufio.Reader) (inventory.Ack, error) {
	code, err := r.ReadByte()
	if err != nil {
		return inventory.Ack{}, err
	}
	if int(code) >= len(ackStates) {
		return inventory.Ack{}, fmt.Errorf("bad state code %d", code)
	}
	sku, err := readString(r)
	if err != nil {
		return inventory.Ack{}, err
	}
	id, err := readString(r)
	if err != nil {
		return inventory.Ack{}, err
	}
	qty, err := binary.ReadVarint(r)
	if err != nil {
		return inventory.Ack{}, err
	}
	return inventory.Ack{OrderID: id, SKU: sku, State: ackStates[code], Qty: qty}, nil
}

func readString(r *bufio.Reader) (string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return "", err
	}
	if n > 1<<16 {
		return "", fmt.Errorf("string of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// all reads the whole log into memory (a generator's acks travel to its
// parent in its results).
func (l *ackLog) all(ctx context.Context) ([]inventory.Ack, error) {
	out := make([]inventory.Ack, 0, l.len())
	err := l.EachAck(ctx, func(b []inventory.Ack) error { out = append(out, b...); return nil })
	return out, err
}

// Close removes the log. Idempotent.
func (l *ackLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return nil
	}
	l.done = true
	_ = l.f.Close()
	return os.RemoveAll(l.dir)
}

var _ audit.AckSource = (*ackLog)(nil)

// Len is how many acks the log holds (the audit's progress total).
func (l *ackLog) Len() int { return int(l.len()) }
