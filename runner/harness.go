package runner

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stockbench/stockbench/results"
)

// resetPeakRSS asks the kernel to restart this process's peak resident
// memory count (writing 5 to /proc/self/clear_refs), so a run's peak is its
// own and not an earlier run's; false when it could not.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// procStatusKB reads one kB field (VmHWM, VmRSS) of /proc/self/status; 0
// when there is none.
func procStatusKB(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		return v
	}
	return 0
}

// rssMB is the process's resident memory now, in MB.
func rssMB() float64 { return float64(procStatusKB("VmRSS")) / 1024 }

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
	if kb := procStatusKB("VmHWM"); kb > 0 {
		mb := float64(kb) / 1024
		h.PeakRSSMB, h.PeakRSSReset = &mb, reset
	}
	h.Buyers = buyers
	if buyers > 0 && cpu > 0 {
		v := float64(cpu) / float64(time.Millisecond) / float64(buyers) * 1000
		h.HarnessCPUMSPer1kBuyers = &v
	}
}
