package runner

import (
	"syscall"
	"time"

	"github.com/stockbench/stockbench/internal/sysstat"
	"github.com/stockbench/stockbench/results"
)

// rssMB is the process's resident memory now, in MB.
func rssMB() float64 {
	rss, _ := sysstat.ProcMem("self")
	return float64(rss) / (1 << 20)
}

// peakRSSMB is the process's peak resident memory, in MB (since the last
// sysstat.ResetPeak); 0 where the kernel does not report it.
func peakRSSMB() float64 {
	_, peak := sysstat.ProcMem("self")
	return float64(peak) / (1 << 20)
}

// selfCPU is this process's CPU time so far (user + system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// harnessFigures adds the harness's cost of a run to h: its peak memory
// and the CPU it spent over the load phase per thousand buyers begun.
func harnessFigures(h *results.Harness, reset bool, cpu time.Duration, buyers int64) {
	if mb := peakRSSMB(); mb > 0 {
		h.PeakRSSMB, h.PeakRSSReset = &mb, reset
	}
	h.Buyers = buyers
	if buyers > 0 && cpu > 0 {
		v := float64(cpu) / float64(time.Millisecond) / float64(buyers) * 1000
		h.HarnessCPUMSPer1kBuyers = &v
	}
}
