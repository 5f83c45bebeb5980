package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
)

// TestAckLog: acks written to the log come back, in order and whole, in
// batches of at most audit.AckBatch; concurrent writers lose nothing.
func TestAckLog(t *testing.T) {
	ack := func(i int) inventory.Ack {
		st := []inventory.OrderState{inventory.StateReserved, inventory.StateConfirmed, inventory.StateCancelled, inventory.AckRefused}[i%4]
		sku := ""
		if i%3 == 0 {
			sku = fmt.Sprintf("SKU-%d", i%7)
		}
		return inventory.Ack{OrderID: fmt.Sprintf("s1-w%d-%d", i%128, i), SKU: sku, State: st}
	}
	for _, c := range []struct {
		name    string
		n       int
		writers int
	}{
		{"empty", 0, 1},
		{"one", 1, 1},
		{"exactly one batch", audit.AckBatch, 1},
		{"several batches", 3*audit.AckBatch + 17, 1},
		{"concurrent writers", 20000, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := newAckLog()
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var wg sync.WaitGroup
			for w := range c.writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < c.n; i += c.writers {
						l.add(ack(i))
					}
				}()
			}
			wg.Wait()
			seen := map[string]inventory.Ack{}
			var order []string
			err = l.EachAck(context.Background(), func(b []inventory.Ack) error {
				if len(b) == 0 || len(b) > audit.AckBatch {
					return fmt.Errorf("batch of %d", len(b))
				}
				for _, a := range b {
					seen[a.OrderID] = a
					order = append(order, a.OrderID)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(order) != c.n || len(seen) != c.n || l.len() != int64(c.n) {
				t.Fatalf("read %d acks (%d distinct), logged %d, want %d", len(order), len(seen), l.len(), c.n)
			}
			for i := range c.n {
				if want := ack(i); seen[want.OrderID] != want {
					t.Fatalf("ack %d: got %+v, want %+v", i, seen[want.OrderID], want)
				}
				if c.writers == 1 && order[i] != ack(i).OrderID {
					t.Fatalf("ack %d out of order: %s", i, order[i])
				}
			}
			// A second read gives the same (the audit reads twice).
			n := 0
			if err := l.EachAck(context.Background(), func(b []inventory.Ack) error { n += len(b); return nil }); err != nil || n != c.n {
				t.Fatalf("second read: %d acks, %v", n, err)
			}
		})
	}
}

// TestAckLogBadStateAndClose: an ack of an unknown state fails the read,
// and Close removes the log's directory (twice is fine).
func TestAckLogBadStateAndClose(t *testing.T) {
	l, err := newAckLog()
	if err != nil {
		t.Fatal(err)
	}
	l.add(inventory.Ack{OrderID: "x", State: "bogus"})
	if err := l.EachAck(context.Background(), func([]inventory.Ack) error { return nil }); err == nil {
		t.Fatal("an ack of an unknown state was dropped silently")
	}
	dir := l.dir
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("log dir left behind: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// refuser answers every confirm with ErrOutOfStock, everything else with
// nil: the ledger's bookkeeping without stores.
type refuser struct{ strategies.Strategy }

func (refuser) Reserve(context.Context, inventory.Reservation) error { return nil }
func (refuser) Confirm(context.Context, inventory.OrderRef) error    { return inventory.ErrOutOfStock }

// TestLedgerReserved: a confirm refused for lack of stock is a refused ack
// only after an acknowledged reserve; the ledger forgets an order at its
// confirm's answer, and forgets unanswered ones after two rotations of keep.
func TestLedgerReserved(t *testing.T) {
	acks, err := newAckLog()
	if err != nil {
		t.Fatal(err)
	}
	defer acks.Close()
	ctx := context.Background()
	l := newLedger(refuser{}, nil, acks, time.Hour)
	for _, id := range []string{"a", "b"} {
		if err := l.Reserve(ctx, inventory.Reservation{OrderID: id, SKU: "S", Qty: 1}); err != nil {
			t.Fatal(err)
		}
	}
	_ = l.Confirm(ctx, inventory.OrderRef{OrderID: "a", SKU: "S"})     // reserved: refused ack
	_ = l.Confirm(ctx, inventory.OrderRef{OrderID: "never", SKU: "S"}) // not reserved: no ack
	_ = l.Confirm(ctx, inventory.OrderRef{OrderID: "a", SKU: "S"})     // answered already: no ack
	got := map[inventory.OrderState]int{}
	if err := acks.EachAck(ctx, func(b []inventory.Ack) error {
		for _, a := range b {
			got[a.State]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got[inventory.StateReserved] != 2 || got[inventory.AckRefused] != 1 || len(got) != 2 {
		t.Fatalf("acks by state %v, want 2 reserved and 1 refused", got)
	}
	if len(l.reserved) != 1 {
		t.Fatalf("%d orders remembered, want only b", len(l.reserved))
	}

	// Rotation: an order is kept for at least keep and at most 2×keep.
	l.keep = time.Minute
	t0 := l.rotated
	l.remember("c", time.Time{}, t0.Add(time.Minute))    // rotates: b goes old
	l.remember("d", time.Time{}, t0.Add(90*time.Second)) // no rotation
	if _, ok := l.reservedOld["b"]; !ok {
		t.Fatal("b dropped before two rotations")
	}
	l.remember("e", time.Time{}, t0.Add(2*time.Minute)) // rotates: b gone, c and d old
	if _, ok := l.reservedOld["b"]; ok || len(l.reservedOld) != 2 || len(l.reserved) != 1 {
		t.Fatalf("after two rotations: new %v, old %v", l.reserved, l.reservedOld)
	}
}

// TestDeadlines: unset, the settle deadline grows with the catalog and
// what is pending, the audit's with the catalog and the acks to check;
// set, each is what was given.
func TestDeadlines(t *testing.T) {
	for _, c := range []struct {
		name                string
		o                   Options
		skus                int
		acks, pending       int64
		wantSettle, wantAud time.Duration
	}{
		{"nothing pending", Options{}, 10, 0, 0, 2 * time.Minute, time.Minute},
		{"negative is none", Options{}, 10, -1, -5, 2 * time.Minute, time.Minute},
		{"a backlog of expiries", Options{}, 10, 0, 100000, 2*time.Minute + 100*time.Second, time.Minute},
		{"an hour of acks", Options{}, 10, 5000000, 0, 2 * time.Minute, time.Minute + 1000*time.Second},
		{"a million SKUs", Options{}, 1000000, 0, 0, 12 * time.Minute, 11 * time.Minute},
		{"given", Options{SettleTimeout: time.Nanosecond, AuditTimeout: time.Second}, 1000000, 5000000, 100000, time.Nanosecond, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, a := c.o.deadlines(c.skus, c.acks, c.pending)
			if s != c.wantSettle || a != c.wantAud {
				t.Fatalf("settle %s, audit %s; want %s, %s", s, a, c.wantSettle, c.wantAud)
			}
		})
	}
}

// TestAckLogStateDir: a state directory's log holds every ack as soon as
// add returns (no buffer: read back by another reader before any flush or
// close), ReadAckFile drops only a torn last record and says its size,
// and a log reopened with keep appends to its predecessor's whole records
// (without keep it starts empty).
func TestAckLogStateDir(t *testing.T) {
	ack := func(i int) inventory.Ack {
		if i%5 == 4 {
			return inventory.Ack{OrderID: fmt.Sprintf("restock-%d", i), SKU: "SKU-1", State: inventory.AckRestockUnknown, Qty: int64(i)}
		}
		return inventory.Ack{OrderID: fmt.Sprintf("o-%d", i), SKU: "SKU-1", State: inventory.StateConfirmed}
	}
	for _, c := range []struct {
		name       string
		first      int
		torn       []byte // bytes a kill left after the last whole record
		keep       bool
		then, want int // acks the second log adds; acks it then holds
	}{
		{"nothing logged", 0, nil, true, 2, 2},
		{"whole records kept", 7, nil, true, 3, 10},
		{"torn record dropped, rest kept", 7, []byte{1, 5, 'S', 'K'}, true, 3, 10},
		{"torn state byte alone dropped", 4, []byte{1}, true, 1, 5},
		{"without keep: a new log", 7, []byte{1, 5}, false, 3, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := t.TempDir() + "/" + AckFile
			l, err := openAckLog(path, false)
			if err != nil {
				t.Fatal(err)
			}
			for i := range c.first {
				l.add(ack(i))
			}
			// Not closed, not flushed: what a SIGKILL leaves.
			got, torn, err := ReadAckFile(path)
			if err != nil || len(got) != c.first || torn != 0 {
				t.Fatalf("before the tear: %d acks, %d torn bytes, %v; want %d, 0", len(got), torn, err, c.first)
			}
			for i, a := range got {
				if a != ack(i) {
					t.Fatalf("ack %d: %+v, want %+v", i, a, ack(i))
				}
			}
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(c.torn); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if got, torn, err = ReadAckFile(path); err != nil || len(got) != c.first || torn != int64(len(c.torn)) {
				t.Fatalf("after the tear: %d acks, %d torn bytes, %v; want %d, %d", len(got), torn, err, c.first, len(c.torn))
			}
			l2, err := openAckLog(path, c.keep)
			if err != nil {
				t.Fatal(err)
			}
			for i := range c.then {
				l2.add(ack(100 + i))
			}
			all, err := l2.all(context.Background())
			if err != nil || len(all) != c.want || l2.len() != int64(c.want) {
				t.Fatalf("reopened: read %d (%v), counted %d, want %d", len(all), err, l2.len(), c.want)
			}
			if err := l2.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("a state directory's log is kept by Close: %v", err)
			}
			l.Close()
		})
	}
}

// BenchmarkAckLogAdd is the cost of one ack: a run's own log (buffered)
// against a state directory's (one write(2) per ack).
func BenchmarkAckLogAdd(b *testing.B) {
	for _, c := range []struct {
		name string
		open func() (*ackLog, error)
	}{
		{"buffered", newAckLog},
		{"write-per-ack", func() (*ackLog, error) { return openAckLog(b.TempDir()+"/"+AckFile, false) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			l, err := c.open()
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			a := inventory.Ack{OrderID: "s1-w12-123456", SKU: "SKU-00000", State: inventory.StateConfirmed}
			b.ResetTimer()
			for range b.N {
				l.add(a)
			}
		})
	}
}
