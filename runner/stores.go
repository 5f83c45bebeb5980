package runner

import (
	"context"
	"sync"
	"time"

	"github.com/stockbench/stockbench/internal/sysstat"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers"
)

// storeStatus are the MySQL status variables sampled each second.
var storeStatus = []string{"Innodb_row_lock_time", "Innodb_row_lock_waits", "Com_commit", "Com_rollback",
	"Threads_running", "Innodb_buffer_pool_reads"}

// storeReading is one reading of both stores' counters (nil maps: that
// store could not be read).
type storeReading struct {
	mysql, redis map[string]float64
}

// storeSampler reads the stores' own counters at the end of every second
// of the measured phase, on a goroutine of its own: one SHOW GLOBAL STATUS
// and one INFO (per cluster master) a second, through the run's pools.
// Its methods are safe for concurrent use.
type storeSampler struct {
	conns servers.Conns
	from  time.Time
	stop  context.CancelFunc
	done  chan struct{}

	mu      sync.Mutex
	seconds []*results.StoreSecond // second i+1; nil: not read
	prev    *storeReading          // the reading that ended the last second
	total   results.StoreSecond    // counters summed over the seconds
}

// startStores samples from the start of the measured phase, from, until
// end.
func startStores(conns servers.Conns, from time.Time) *storeSampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &storeSampler{conns: conns, from: from, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if wait := time.Until(from); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		prev := s.read(ctx)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		s.prev = &prev
		s.mu.Unlock()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			cur := s.read(ctx)
			if ctx.Err() != nil {
				return
			}
			sec := storeSecond(prev, cur)
			s.add(sec, cur)
			prev = cur
		}
	}()
	return s
}

func (s *storeSampler) add(sec *results.StoreSecond, cur storeReading) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seconds = append(s.seconds, sec)
	if sec != nil {
		addCounters(&s.total, sec)
	}
	s.prev = &cur
}

// end stops sampling when the load stopped and returns the seconds read,
// second i+1 at index i. The second the load ended on, when its tick lost
// the race with the end, is read now.
func (s *storeSampler) end(stopped time.Time) []*results.StoreSecond {
	if s == nil {
		return nil
	}
	s.stop()
	<-s.done
	s.mu.Lock()
	prev, n := s.prev, len(s.seconds)
	s.mu.Unlock()
	if want := int((stopped.Sub(s.from) + 100*time.Millisecond) / time.Second); prev != nil && n < want {
		cur := s.read(context.Background())
		s.add(storeSecond(*prev, cur), cur)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*results.StoreSecond{}, s.seconds...)
}

// snapshot is the counters summed so far and the last second read (nil
// when none yet).
func (s *storeSampler) snapshot() (total, latest *results.StoreSecond) {
	if s == nil {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seconds) == 0 {
		return nil, nil
	}
	t := s.total
	for i := len(s.seconds) - 1; i >= 0; i-- {
		if s.seconds[i] != nil {
			l := *s.seconds[i]
			return &t, &l
		}
	}
	return &t, nil
}

// read takes one reading; a store that does not answer within the second
// is left out of it.
func (s *storeSampler) read(ctx context.Context) storeReading {
	ctx, cancel := context.WithTimeout(ctx, 900*time.Millisecond)
	defer cancel()
	var r storeReading
	if s.conns.DB != nil {
		r.mysql, _ = sysstat.MySQLStatus(ctx, s.conns.DB, storeStatus...)
	}
	if s.conns.Redis != nil {
		r.redis, _ = sysstat.RedisInfo(ctx, s.conns.Redis)
	}
	return r
}

// storeSecond is the second between readings a and b: counters' rises,
// gauges at b; nil when a store was not read at either end.
func storeSecond(a, b storeReading) *results.StoreSecond {
	if a.mysql == nil || b.mysql == nil || a.redis == nil || b.redis == nil {
		return nil
	}
	d := func(m string) float64 { return max(0, b.mysql[m]-a.mysql[m]) }
	return &results.StoreSecond{
		MySQLRowLockTimeMS:   d("Innodb_row_lock_time"),
		MySQLRowLockWaits:    int64(d("Innodb_row_lock_waits")),
		MySQLCommits:         int64(d("Com_commit")),
		MySQLRollbacks:       int64(d("Com_rollback")),
		MySQLThreadsRunning:  int64(b.mysql["Threads_running"]),
		MySQLBufferPoolReads: int64(d("Innodb_buffer_pool_reads")),
		RedisOpsPerSec:       b.redis["instantaneous_ops_per_sec"],
		RedisCPUPct: 100 * max(0, b.redis["used_cpu_sys"]+b.redis["used_cpu_user"]-
			a.redis["used_cpu_sys"]-a.redis["used_cpu_user"]),
		RedisClients:   int64(b.redis["connected_clients"]),
		RedisUsedBytes: int64(b.redis["used_memory"]),
	}
}

// addCounters adds the counters of s (not its gauges) to t.
func addCounters(t, s *results.StoreSecond) {
	t.MySQLRowLockTimeMS += s.MySQLRowLockTimeMS
	t.MySQLRowLockWaits += s.MySQLRowLockWaits
	t.MySQLCommits += s.MySQLCommits
	t.MySQLRollbacks += s.MySQLRollbacks
	t.MySQLBufferPoolReads += s.MySQLBufferPoolReads
	t.RedisCPUPct += s.RedisCPUPct
}

// attachStores puts the stores' seconds into the run's series, adding the
// seconds of the measured window that completed no flow.
func attachStores(series []results.SeriesPoint, secs []*results.StoreSecond, measured time.Duration) []results.SeriesPoint {
	for len(series) < len(secs) && len(series) < int(measured/time.Second) {
		series = append(series, results.SeriesPoint{Second: len(series) + 1})
	}
	for i := range series {
		if i < len(secs) {
			series[i].Stores = secs[i]
		}
	}
	return series
}
