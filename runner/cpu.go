package runner

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stockbench/stockbench/servers"
)

// clockTicks is USER_HZ, 100 on every Linux platform Go supports.
const clockTicks = 100

// cpuReading is a process's or container's total CPU time and when it was
// read.
type cpuReading struct {
	cpu time.Duration
	at  time.Time
}

// cpuSource reads one CPU total; ok is false when it cannot.
type cpuSource func() (cpuReading, bool)

// cpuSampler measures the CPU time of the servers and of the harness itself
// over the measured phase: from /proc for processes this machine runs (the
// local backend's children, the harness), from the engine's stats for
// containers (sampled about once a second, so a phase shorter than two
// samples reports no container figure). Percentages are of one core; each
// uses the times of its own two readings.
type cpuSampler struct {
	sources map[string]cpuSource
	mu      sync.Mutex
	start   map[string]cpuReading
	pending sync.WaitGroup
	result  map[string]float64 // set by mark
}

func newCPUSampler(ep servers.Endpoints) *cpuSampler {
	src := map[string]cpuSource{"harness": procSource(os.Getpid())}
	if ep.MySQLPID > 0 {
		src["mysql"] = procSource(append([]int{ep.MySQLPID}, ep.ExtraPIDs["mysql"]...)...)
	}
	if ep.RedisPID > 0 {
		src["redis"] = procSource(append([]int{ep.RedisPID}, ep.ExtraPIDs["redis"]...)...)
	}
	for k, f := range ep.CPU {
		src[k] = func() (cpuReading, bool) {
			cpu, at, ok := f()
			return cpuReading{cpu, at}, ok
		}
	}
	return &cpuSampler{sources: src}
}

// procSource reads the CPU time of processes from /proc, summed: a cluster's
// nodes count as one server.
func procSource(pids ...int) cpuSource {
	return func() (cpuReading, bool) {
		var sum int64
		for _, pid := range pids {
			t, ok := procTicks(pid)
			if !ok {
				return cpuReading{}, false
			}
			sum += t
		}
		return cpuReading{cpu: time.Duration(sum) * time.Second / clockTicks, at: time.Now()}, true
	}
}

// readAll reads every source concurrently.
func (c *cpuSampler) readAll() map[string]cpuReading {
	out := map[string]cpuReading{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k, f := range c.sources {
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

// begin starts a measurement; it returns at once.
func (c *cpuSampler) begin() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.result, c.start = nil, nil
	c.mu.Unlock()
	c.pending.Add(1)
	go func() {
		defer c.pending.Done()
		r := c.readAll()
		c.mu.Lock()
		c.start = r
		c.mu.Unlock()
	}()
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
	r := c.compute()
	c.mu.Lock()
	c.result = r
	c.mu.Unlock()
}

// end returns mysql_cpu_pct, redis_cpu_pct, server_cpu_pct (their sum) and
// harness_cpu_pct for the figures it could read: as marked, or as of now.
func (c *cpuSampler) end() map[string]float64 {
	if c == nil {
		return map[string]float64{}
	}
	c.mu.Lock()
	r := c.result
	c.mu.Unlock()
	if r != nil {
		return r
	}
	return c.compute()
}

func (c *cpuSampler) compute() map[string]float64 {
	out := map[string]float64{}
	end := c.readAll()
	c.pending.Wait()
	c.mu.Lock()
	start := c.start
	c.mu.Unlock()
	server, seen := 0.0, false
	for k, r1 := range end {
		r0, ok := start[k]
		secs := r1.at.Sub(r0.at).Seconds()
		if !ok || secs <= 0 {
			continue
		}
		pct := (r1.cpu - r0.cpu).Seconds() / secs * 100
		out[k+"_cpu_pct"] = pct
		if k != "harness" {
			server += pct
			seen = true
		}
	}
	if seen {
		out["server_cpu_pct"] = server
	}
	return out
}

// procTicks reads utime+stime of a process from /proc/PID/stat.
func procTicks(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name may hold spaces; fields resume after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return u + st, true
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
