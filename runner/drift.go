package runner

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stockbench/stockbench/internal/sysstat"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers"
)

// driftSampler samples a run's resources through its load, every period,
// on a goroutine of its own: the harness's memory, the servers', the
// stockbench tables' sizes, the outbox relay's backlog, the processes' CPU
// time and the cost of a fixed reference work (refWork). Each sample is a
// handful of cheap reads (estimates from information_schema, not counts
// over the tables) and a few ms of one core, so sampling does not load
// the stores. Its memory is a few hundred bytes a sample.
type driftSampler struct {
	conns    servers.Conns
	mysqlPID int
	relay    bool
	every    time.Duration
	cpu      func() map[string]float64 // CPU seconds by process; nil: none

	mu     sync.Mutex
	at     []time.Time
	points []results.DriftPoint
	stop   context.CancelFunc
	done   chan struct{}
}

// driftEvery is the sampling period for a measured phase of d: sixty
// samples or more, at most one every 10 s, at least one a second.
func driftEvery(d time.Duration) time.Duration {
	return min(10*time.Second, max(time.Second, d/60))
}

// startDrift samples until stopped. relay says the strategy has an outbox
// relay whose backlog is worth sampling; cpu reads the processes' CPU
// seconds.
func startDrift(conns servers.Conns, mysqlPID int, relay bool, every time.Duration, cpu func() map[string]float64) *driftSampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &driftSampler{conns: conns, mysqlPID: mysqlPID, relay: relay, every: every, cpu: cpu, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		s.sample(ctx)
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.sample(ctx)
			}
		}
	}()
	return s
}

// end stops sampling, takes a last sample and returns the samples with
// their Second counted from the start of the measured phase, from.
func (s *driftSampler) end(from time.Time) (time.Duration, []results.DriftPoint) {
	s.stop()
	<-s.done
	s.sample(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]results.DriftPoint, len(s.points))
	for i, p := range s.points {
		p.Second = s.at[i].Sub(from).Seconds()
		out[i] = p
	}
	return s.every, out
}

func (s *driftSampler) sample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	now := time.Now()
	var p results.DriftPoint
	if d, ok := refWork(); ok {
		p.RefCPUMS = float64(d.Microseconds()) / 1000
	}
	if s.cpu != nil {
		p.CPUSec = s.cpu()
	}
	p.Machine = machineCPU()
	p.HarnessRSSBytes, _ = sysstat.ProcMem("self")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.HarnessHeapBytes = int64(ms.HeapInuse)
	if s.mysqlPID > 0 {
		p.MySQLRSSBytes, _ = sysstat.ProcMem(strconv.Itoa(s.mysqlPID))
	}
	if s.conns.Redis != nil {
		p.RedisUsedBytes, _ = sysstat.RedisUsedMemory(ctx, s.conns.Redis)
	}
	if s.conns.DB != nil {
		tableSizes(ctx, s.conns.DB, &p)
		if st, err := sysstat.MySQLStatus(ctx, s.conns.DB, "Innodb_buffer_pool_reads", "Innodb_history_list_length"); err == nil {
			p.BufferPoolDiskReads, p.HistoryLength = int64(st["Innodb_buffer_pool_reads"]), int64(st["Innodb_history_list_length"])
		}
		if s.relay {
			relayBacklog(ctx, s.conns.DB, now, &p)
		}
	}
	s.mu.Lock()
	s.at = append(s.at, now)
	s.points = append(s.points, p)
	s.mu.Unlock()
}

// tableSizes fills the tables' estimated rows and bytes.
func tableSizes(ctx context.Context, db *sql.DB, p *results.DriftPoint) {
	rows, err := db.QueryContext(ctx, `SELECT table_name, COALESCE(table_rows,0), COALESCE(data_length,0)+COALESCE(index_length,0)
		FROM information_schema.tables WHERE table_schema=DATABASE()`)
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n, b int64
		if rows.Scan(&name, &n, &b) != nil {
			return
		}
		p.TableBytes += b
		switch strings.ToLower(name) {
		case "orders":
			p.OrdersRows = n
		case "outbox":
			p.OutboxRows = n
		}
	}
}

// relayBacklog reads the age of the oldest unapplied outbox event and how
// many wait (the relay deletes what it applies, so the count is of the
// backlog only).
func relayBacklog(ctx context.Context, db *sql.DB, now time.Time, p *results.DriftPoint) {
	var created time.Time
	lag := 0.0
	err := db.QueryRowContext(ctx, "SELECT created_at FROM outbox WHERE applied=0 ORDER BY id LIMIT 1").Scan(&created)
	switch {
	case err == nil:
		lag = max(0, float64(now.Sub(created).Microseconds())/1000)
	case !errors.Is(err, sql.ErrNoRows):
		return
	}
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox WHERE applied=0").Scan(&n); err != nil {
		return
	}
	p.RelayLagMS, p.RelayBacklog = &lag, &n
}

// driftOf turns the samples and the merged per-second buckets of a timed
// run's measured phase (measured seconds long) into its Drift.
func driftOf(every time.Duration, points []results.DriftPoint, series []bucket, lat *latStore, measured time.Duration) *results.Drift {
	secs := measured.Seconds()
	if secs <= 0 {
		return nil
	}
	d := &results.Drift{EverySec: every.Seconds(), Points: points, WindowSec: results.DriftWindowSec(secs)}
	for from := 0.0; from < secs; from += 60 {
		d.Minutes = append(d.Minutes, window(points, series, lat, from, min(secs, from+60)))
	}
	d.First = window(points, series, lat, 0, d.WindowSec)
	d.Last = window(points, series, lat, max(0, secs-d.WindowSec), secs)
	d.FlowsChangePct = results.ChangePct(d.First.FlowsPerSec, d.Last.FlowsPerSec)
	d.P99ChangePct = results.ChangePct(d.First.FlowP99MS, d.Last.FlowP99MS)
	return d
}

// window is the DriftWindow of seconds [from, to) of the measured phase.
func window(points []results.DriftPoint, series []bucket, lat *latStore, from, to float64) results.DriftWindow {
	w := results.DriftWindow{FromSec: from, ToSec: to}
	var flows int64
	end := int(to + 0.999)
	for i := int(from); i < end && i < len(series); i++ {
		flows += series[i].flows
	}
	if to > from {
		w.FlowsPerSec = float64(flows) / (to - from)
	}
	w.FlowP99MS = float64(lat.quantile(int(from), end, 0.99)) / 1000
	var firstIn, lastIn *results.DriftPoint
	var refs []float64
	for _, p := range points {
		if p.Second < from || p.Second > to+0.5 {
			continue
		}
		lastIn = &p
		if p.RefCPUMS > 0 {
			refs = append(refs, p.RefCPUMS)
		}
		if firstIn == nil {
			firstIn = &p
		} else if p.Second > firstIn.Second && p.BufferPoolDiskReads >= firstIn.BufferPoolDiskReads && firstIn.BufferPoolDiskReads > 0 {
			w.DiskReadsPerSec = float64(p.BufferPoolDiskReads-firstIn.BufferPoolDiskReads) / (p.Second - firstIn.Second)
		}
		w.HarnessRSSBytes, w.MySQLRSSBytes, w.RedisUsedBytes = p.HarnessRSSBytes, p.MySQLRSSBytes, p.RedisUsedBytes
		w.OrdersRows, w.OutboxRows, w.HistoryLength = p.OrdersRows, p.OutboxRows, p.HistoryLength
		if p.RelayLagMS != nil {
			v := *p.RelayLagMS
			if w.RelayLagMaxMS != nil {
				v = max(v, *w.RelayLagMaxMS)
			}
			w.RelayLagMaxMS = &v
		}
	}
	w.RefCPUMS = results.SpreadOfValues(refs).Median
	if firstIn != nil && lastIn != nil {
		w.CPUMSPerFlow = cpuPerFlow(*firstIn, *lastIn, series)
		w.Machine = machineShare(firstIn.Machine, lastIn.Machine)
	}
	return w
}

// cpuPerFlow is each process's CPU time per flow between samples a and b,
// in ms: the CPU it used between them over the flows of the whole seconds
// between them. A process whose count went back (it restarted) or that
// either sample lacks is left out; nil when no flow fell between them.
func cpuPerFlow(a, b results.DriftPoint, series []bucket) map[string]float64 {
	var flows int64
	for i := max(0, int(math.Round(a.Second))); i < int(math.Round(b.Second)) && i < len(series); i++ {
		flows += series[i].flows
	}
	if flows == 0 {
		return nil
	}
	out := map[string]float64{}
	for k, to := range b.CPUSec {
		if from, ok := a.CPUSec[k]; ok && to >= from {
			out[k] = 1000 * (to - from) / float64(flows)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
