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
// append-only file read back by the auditor in batches (audit.AckSource),
// so the harness's memory does not grow with the length of the run. A
// record is a state byte, then the SKU and the order id, each as a uvarint
// length and its bytes, then the quantity as a varint (a restock's; 0, one
// byte, for an order's) — a few tens of bytes an ack. Safe for concurrent
// use.
//
// Two kinds: a run's own log (newAckLog) sits in a temporary directory of
// its own, is written through a buffer and removed by Close; a generator's
// log in its state directory (openAckLog) is written with one write(2) per
// ack and no user-space buffer, so a generator killed with SIGKILL leaves
// every ack it had recorded in the file (readAckFile), and Close keeps it.
type ackLog struct {
	mu  sync.Mutex
	dir string // removed by Close; "" for a state directory's log
	f   *os.File
	// w is the buffer of a run's own log; nil: every add is one write(2)
	// to f.
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

// AckFile is a generator's ack log in its state directory (run
// --state-dir): every ack its clients got and every restock it issued, one
// write(2) each, so it survives the generator's SIGKILL.
const AckFile = "acks.bin"

// openAckLog opens the ack log at path, unbuffered (see ackLog). With keep
// it appends to the acks a predecessor on the same state directory left (a
// generator restarted on the stores as they are: its acks still grade
// them), cut after the last whole record; without, it starts empty.
func openAckLog(path string, keep bool) (*ackLog, error) {
	flags := os.O_CREATE | os.O_RDWR
	if !keep {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ack log: %w", err)
	}
	var n, whole int64
	if keep {
		if n, whole, err = scanAcks(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("ack log %s: %w", path, err)
		}
		if err := f.Truncate(whole); err != nil {
			f.Close()
			return nil, fmt.Errorf("ack log: %w", err)
		}
	}
	if _, err := f.Seek(whole, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("ack log: %w", err)
	}
	return &ackLog{f: f, n: n}, nil
}

// scanAcks counts the whole records of an ack log from its start and the
// bytes they take (a torn last record, cut by a crash mid-write, is not
// counted).
func scanAcks(f *os.File) (n, whole int64, err error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, 0, err
	}
	cr := &countingReader{r: bufio.NewReaderSize(f, 256<<10)}
	for {
		if _, err := readAck(cr); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return n, whole, nil
			}
			return n, whole, fmt.Errorf("record %d: %w", n+1, err)
		}
		n++
		whole = cr.n
	}
}

// ReadAckFile reads the ack log a generator left in its state directory
// (AckFile), for the parent of a generator that died: every whole record,
// and how many bytes of a torn last record (cut by the kill) it dropped.
func ReadAckFile(path string) (acks []inventory.Ack, tornBytes int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("ack log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("ack log: %w", err)
	}
	cr := &countingReader{r: bufio.NewReaderSize(f, 256<<10)}
	var whole int64
	for {
		a, err := readAck(cr)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return acks, fi.Size() - whole, nil
			}
			return acks, 0, fmt.Errorf("ack log %s: record %d: %w", path, len(acks)+1, err)
		}
		acks = append(acks, a)
		whole = cr.n
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
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
	var w io.Writer = l.f
	if l.w != nil {
		w = l.w
	}
	if _, err := w.Write(b); err != nil {
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
	if l.err == nil && !l.done && l.w != nil {
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

// ackReader is what readAck reads from.
type ackReader interface {
	io.Reader
	io.ByteReader
}

// readAck reads one record; io.EOF before its first byte, and
// io.ErrUnexpectedEOF for a record cut short.
func readAck(r ackReader) (inventory.Ack, error) {
	code, err := r.ReadByte()
	if err != nil {
		return inventory.Ack{}, err
	}
	a, err := readAckRest(r, code)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return a, err
}

func readAckRest(r ackReader, code byte) (inventory.Ack, error) {
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

func readString(r ackReader) (string, error) {
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

// Close removes a run's own log; a state directory's log is closed and
// kept (its generator's caller removes it once the acks are in its
// results). Idempotent.
func (l *ackLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return nil
	}
	l.done = true
	err := l.f.Close()
	if l.dir == "" {
		return err
	}
	return os.RemoveAll(l.dir)
}

var _ audit.AckSource = (*ackLog)(nil)

// Len is how many acks the log holds (the audit's progress total).
func (l *ackLog) Len() int { return int(l.len()) }
