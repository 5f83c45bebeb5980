package runner

import (
	"os"
	"sync"
	"time"

	"github.com/stockbench/stockbench/internal/sysstat"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers"
)

// cpuReading is a process's or container's total CPU time and when it was
// read; id names the process it came from (a pid; 0 for a container), so a
// restarted server's counter, which starts again from zero, is told apart.
type cpuReading struct {
	cpu time.Duration
	at  time.Time
	id  int
	// wait is the time the source's threads waited on a run queue for a
	// core (processes only; waitOK false for a container).
	wait   time.Duration
	waitOK bool
}

// cpuSource reads one CPU total; ok is false when it cannot.
type cpuSource func() (cpuReading, bool)

// cpuAcc accumulates one source's CPU time over a measurement, across
// restarts: a reading from another process, or one lower than the last
// (a container's counter restarts from zero), starts a new count.
// The run-queue wait is summed over live threads, so it drops when a
// thread ends: a drop counts as no wait, a new process's as all of it.
type cpuAcc struct {
	first, last cpuReading
	acc         time.Duration
	wait        time.Duration
	waitOK      bool
}

func (a *cpuAcc) add(r cpuReading) {
	if r.id != a.last.id || r.cpu < a.last.cpu {
		a.acc += r.cpu
	} else {
		a.acc += r.cpu - a.last.cpu
	}
	switch {
	case !r.waitOK || !a.last.waitOK:
		a.waitOK = false
	case r.id != a.last.id:
		a.wait += r.wait
	default:
		a.wait += max(0, r.wait-a.last.wait)
	}
	a.last = r
}

// cpuSampler measures the CPU time of the servers and of the harness itself
// over the measured phase: from /proc for processes this machine runs (the
// local backend's children, the harness — a restarted server's new process
// found through the Faulter), from the engine's stats for containers
// (sampled about once a second, so a phase shorter than two samples
// reports no container figure). It reads every source once a second so
// that a server killed and restarted mid-phase keeps the CPU it used
// before the kill. Percentages are of one core; each uses the times of its
// own first and last readings.
type cpuSampler struct {
	sources map[string]cpuSource
	mu      sync.Mutex
	acc     map[string]*cpuAcc
	stop    chan struct{}
	pending sync.WaitGroup
	result  cpuFigures // set by mark
	// meter, when set, reads the run's cost counters at the same start
	// and end (trial.load sets it for one run).
	meter *costMeter
}

// setMeter has the measurement's start and end also mark m (nil: none).
func (c *cpuSampler) setMeter(m *costMeter) {
	c.mu.Lock()
	c.meter = m
	c.mu.Unlock()
}

// costMeter is the meter set for the current measurement.
func (c *cpuSampler) costMeter() *costMeter {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.meter
}

// samplePeriod is how often a measurement reads its sources.
const samplePeriod = time.Second

func newCPUSampler(ep servers.Endpoints, f servers.Faulter) *cpuSampler {
	src := map[string]cpuSource{"harness": procSource(staticPID(os.Getpid())), refCPUSource: refCPUReading}
	for kind, pid := range map[string]int{servers.TargetMySQL: ep.MySQLPID, servers.TargetRedis: ep.RedisPID} {
		if pid <= 0 {
			continue
		}
		cur := staticPID(pid)
		if f != nil && len(ep.ExtraPIDs[kind]) == 0 {
			// After a restart the server is another process.
			cur = func() []int {
				if p := f.PID(kind); p > 0 {
					return []int{p}
				}
				return nil
			}
		} else if len(ep.ExtraPIDs[kind]) > 0 {
			cur = staticPID(append([]int{pid}, ep.ExtraPIDs[kind]...)...)
			if np, ok := f.(nodePIDs); ok {
				// A cluster rolled back runs as new processes.
				static := cur
				cur = func() []int {
					if pids, ok := np.NodePIDs(kind); ok {
						return pids
					}
					return static()
				}
			}
		}
		src[kind] = procSource(cur)
	}
	for k, fn := range ep.CPU {
		src[k] = func() (cpuReading, bool) {
			cpu, at, ok := fn()
			return cpuReading{cpu: cpu, at: at}, ok
		}
	}
	return &cpuSampler{sources: src}
}

// nodePIDs is a Faulter that follows a cluster's node processes
// (servers.Local).
type nodePIDs interface {
	NodePIDs(target string) ([]int, bool)
}

func staticPID(pids ...int) func() []int { return func() []int { return pids } }

// procSource reads the CPU time of processes from /proc, summed: a cluster's
// nodes count as one server.
func procSource(pids func() []int) cpuSource {
	return func() (cpuReading, bool) {
		ps := pids()
		if len(ps) == 0 {
			return cpuReading{}, false
		}
		var sum int64
		var wait time.Duration
		waitOK := true
		for _, pid := range ps {
			t, ok := sysstat.ProcTicks(pid)
			if !ok {
				return cpuReading{}, false
			}
			sum += t
			w, ok := sysstat.ProcRunQueueWait(pid)
			wait += w
			waitOK = waitOK && ok
		}
		return cpuReading{cpu: time.Duration(sum) * time.Second / sysstat.ClockTicks, at: time.Now(), id: ps[0],
			wait: wait, waitOK: waitOK}, true
	}
}

// serviceCPU is the source of the service processes' CPU (run --service
// process:N).
const serviceCPU = "service"

// setSource adds (or, with a nil src, removes) a source between
// measurements: the service processes of one run. Safe for concurrent use.
func (c *cpuSampler) setSource(name string, src cpuSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	srcs := make(map[string]cpuSource, len(c.sources)+1)
	for k, f := range c.sources {
		srcs[k] = f
	}
	if src == nil {
		delete(srcs, name)
	} else {
		srcs[name] = src
	}
	c.sources = srcs
}

// readAll reads every source concurrently.
func (c *cpuSampler) readAll() map[string]cpuReading {
	out := map[string]cpuReading{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	c.mu.Lock()
	sources := c.sources
	c.mu.Unlock()
	for k, f := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, ok := f(); ok {
				mu.Lock()
				out[k] = r
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// seconds reads every source once: each process's CPU time so far, in
// seconds, by name.
func (c *cpuSampler) seconds() map[string]float64 {
	if c == nil {
		return nil
	}
	out := map[string]float64{}
	for k, r := range c.readAll() {
		out[k] = r.cpu.Seconds()
	}
	withoutRefWork(out)
	return out
}

// withoutRefWork takes the drift sampler's reference work (refCPUSource)
// out of the harness's figure and out of the figures: it is the sampler's
// yardstick, not the load's cost.
func withoutRefWork(f map[string]float64) {
	ref, ok := f[refCPUSource]
	delete(f, refCPUSource)
	if h, okH := f["harness"]; ok && okH {
		f["harness"] = max(0, h-ref)
	}
}

// sample reads every source into the accumulators.
func (c *cpuSampler) sample() {
	r := c.readAll()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, x := range r {
		if a := c.acc[k]; a != nil {
			a.add(x)
		} else {
			c.acc[k] = &cpuAcc{first: x, last: x, waitOK: x.waitOK}
		}
	}
}

// begin starts a measurement; it returns at once and reads the sources
// every samplePeriod until the measurement ends.
func (c *cpuSampler) begin() {
	if c == nil {
		return
	}
	c.halt()
	stop := make(chan struct{})
	c.mu.Lock()
	c.result, c.acc, c.stop = nil, map[string]*cpuAcc{}, stop
	c.mu.Unlock()
	c.pending.Add(1)
	go func() {
		defer c.pending.Done()
		c.sample()
		t := time.NewTicker(samplePeriod)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				c.sample()
			}
		}
	}()
	c.costMeter().begin()
}

// halt stops the periodic reads and waits for them.
func (c *cpuSampler) halt() {
	c.mu.Lock()
	stop := c.stop
	c.stop = nil
	c.mu.Unlock()
	if stop != nil {
		close(stop)
	}
	c.pending.Wait()
}

// window measures from `from` to `to` on timers; the returned func stops
// them if the run ends early.
func (c *cpuSampler) window(from, to time.Time) (stop func()) {
	if c == nil {
		return func() {}
	}
	t1 := time.AfterFunc(time.Until(from), c.begin)
	t2 := time.AfterFunc(time.Until(to), c.mark)
	return func() { t1.Stop(); t2.Stop() }
}

// mark fixes the figures as of now.
func (c *cpuSampler) mark() {
	c.costMeter().mark()
	r := c.compute()
	c.mu.Lock()
	c.result = r
	c.mu.Unlock()
}

// end returns the CPU percent (of one core) of each source it could read
// — mysql, redis, harness — and server, the servers' sum: as marked, or as
// of now. A source it could not read is absent.
func (c *cpuSampler) end() cpuFigures {
	if c == nil {
		return cpuFigures{}
	}
	c.mu.Lock()
	r := c.result
	c.mu.Unlock()
	if r != nil {
		return r
	}
	return c.compute()
}

// cpuFigures are CPU percents by source (mysql, redis, harness, server),
// and under runQueue+source the time the source's threads waited on a run
// queue for a core, in percent of the window (100: one thread waiting the
// whole time).
type cpuFigures map[string]float64

// runQueue prefixes a source's run-queue wait in cpuFigures.
const runQueue = "runq:"

// of is the source's figure, nil when it could not be read.
func (f cpuFigures) of(source string) *float64 {
	if v, ok := f[source]; ok {
		return &v
	}
	return nil
}

func (c *cpuSampler) compute() cpuFigures {
	out := cpuFigures{}
	c.halt()
	c.mu.Lock()
	began := c.acc != nil
	c.mu.Unlock()
	if !began {
		return out
	}
	c.sample()
	c.mu.Lock()
	defer c.mu.Unlock()
	server, seen := 0.0, false
	for k, a := range c.acc {
		secs := a.last.at.Sub(a.first.at).Seconds()
		if secs <= 0 {
			continue
		}
		pct := a.acc.Seconds() / secs * 100
		out[k] = pct
		if a.waitOK && k != refCPUSource {
			out[runQueue+k] = a.wait.Seconds() / secs * 100
		}
		if k != "harness" && k != serviceCPU && k != refCPUSource {
			server += pct
			seen = true
		}
	}
	if seen {
		out["server"] = server
	}
	withoutRefWork(out)
	return out
}

// harnessPerKFlows is the harness's own CPU time per thousand completed
// flows, in milliseconds, from its CPU % of one core over the measured
// window: what the load generator costs per unit of work it drives. ok is
// false without a CPU figure or without flows.
func harnessPerKFlows(pct float64, window time.Duration, flows int64) (ms float64, ok bool) {
	if pct <= 0 || flows <= 0 || window <= 0 {
		return 0, false
	}
	cpuMS := pct / 100 * float64(window) / float64(time.Millisecond)
	return cpuMS / float64(flows) * 1000, true
}

// machineCPU reads the machine's CPU time by kind from /proc/stat; nil
// where it cannot.
func machineCPU() *results.MachineCPU {
	t, ok := sysstat.MachineCPU()
	if !ok {
		return nil
	}
	return machineOf(t)
}

// machineOf sums the machine's CPU times into the kinds a run records.
// Guest time is already in user and nice (sysstat leaves it out).
func machineOf(t sysstat.CPUTimes) *results.MachineCPU {
	return &results.MachineCPU{
		Total:  t.User + t.Nice + t.System + t.Idle + t.IOWait + t.IRQ + t.SoftIRQ + t.Steal,
		Kernel: t.System + t.IRQ + t.SoftIRQ,
		Steal:  t.Steal,
		Idle:   t.Idle + t.IOWait,
	}
}

// machineShare is how the machine's cores spent the time between two
// readings, in percent; nil without both or when no time passed.
func machineShare(a, b *results.MachineCPU) *results.MachineShare {
	if a == nil || b == nil || b.Total <= a.Total {
		return nil
	}
	t := b.Total - a.Total
	pct := func(x, y float64) float64 { return max(0, 100*(y-x)/t) }
	return &results.MachineShare{KernelPct: pct(a.Kernel, b.Kernel), StealPct: pct(a.Steal, b.Steal), IdlePct: pct(a.Idle, b.Idle)}
}
