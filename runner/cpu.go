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

// cpuSampler measures the CPU time of the server processes (when this
// run started them) and of the harness itself over the measured phase, from
// /proc. Percentages are of one core.
type cpuSampler struct {
	pids   map[string]int
	mu     sync.Mutex
	start  map[string]int64
	t0     time.Time
	result map[string]float64 // set by mark
}

func newCPUSampler(ep servers.Endpoints) *cpuSampler {
	pids := map[string]int{"harness": os.Getpid()}
	if ep.MySQLPID > 0 {
		pids["mysql"] = ep.MySQLPID
	}
	if ep.RedisPID > 0 {
		pids["redis"] = ep.RedisPID
	}
	return &cpuSampler{pids: pids}
}

func (c *cpuSampler) begin() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.result = nil
	c.start = map[string]int64{}
	for k, pid := range c.pids {
		if t, ok := procTicks(pid); ok {
			c.start[k] = t
		}
	}
	c.t0 = time.Now()
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
	c.mu.Lock()
	defer c.mu.Unlock()
	c.result = c.compute()
}

// end returns mysql_cpu_pct, redis_cpu_pct, server_cpu_pct (their sum) and
// harness_cpu_pct for the figures it could read: as marked, or as of now.
func (c *cpuSampler) end() map[string]float64 {
	if c == nil {
		return map[string]float64{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.result != nil {
		return c.result
	}
	return c.compute()
}

func (c *cpuSampler) compute() map[string]float64 {
	out := map[string]float64{}
	if c.start == nil {
		return out
	}
	secs := time.Since(c.t0).Seconds()
	if secs <= 0 {
		return out
	}
	server, seen := 0.0, false
	for k, pid := range c.pids {
		t0, ok0 := c.start[k]
		t1, ok1 := procTicks(pid)
		if !ok0 || !ok1 {
			continue
		}
		pct := float64(t1-t0) / clockTicks / secs * 100
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
